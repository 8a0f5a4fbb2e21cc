"""The bpy side of the renderer. Imported only inside render worker processes (it imports bpy)."""
