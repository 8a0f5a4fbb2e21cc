"""RESULTS/report.md and RESULTS/report.html from trials.jsonl (and the trials' run folders, when there).

Both files hold the same parts (docs/report.md says what each shows): the table
laid out as the paper's Table 2, one section per question of the paper with its
test statistic, p-value and figure (benchmarks/table2.py), the table of every
row with its tests, the metric definitions, the learning curves with a generated
account of what they show, the breakdown per question family and kind, the
gallery of distinct broken items rendered before and after
(benchmarks/gallery.py), and the failed trials.

Everything but the gallery comes from trials.jsonl alone, and the same trials
give the same bytes: no timestamps, sorted keys, seeded bootstraps, figures
saved without the software stamp. The gallery is drawn from the run folders and
its captions kept in gallery.json, so a rebuild without them keeps it as it was.

The modules, read in this order: `glossary` (the words), `parts` (what one report
holds), `runs` (the run folders), `cells` and `figures`, `questions` (Table 2 and
the five questions), `pages` (Markdown and HTML), `build` (the whole report).
"""

from benchmarks.gallery import GALLERY_SIZE
from benchmarks.items_folder import read_items_folder
from benchmarks.report.build import GALLERY_PRESETS, build_report
from benchmarks.report.figures import curve_account, size_plot

__all__ = ["GALLERY_PRESETS", "GALLERY_SIZE", "build_report", "curve_account", "read_items_folder", "size_plot"]
