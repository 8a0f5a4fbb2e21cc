"""report.md and report.html from the report's parts."""

from __future__ import annotations

import html

from benchmarks.report.cells import failed_line, gallery_line, provenance_lines
from benchmarks.report.glossary import METRICS, TITLE
from benchmarks.report.parts import ReportParts
from benchmarks.report.questions import body_blocks


def _blocks_md(blocks: list[tuple]) -> list[str]:
    lines: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            lines += ["", f"## {block[1]}", ""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "table":
            lines += _md_table(block[1], block[2]) + [""]
        elif kind == "img":
            lines += [f"![{block[2]}]({block[1]})", ""]
        elif kind == "folded":
            lines += ["", f"**{block[1]}**: not answered by these trials: {block[2]}", ""]
        else:
            lines += [f"- {line}" for line in block[1]] + [""]
    return lines


def _blocks_html(blocks: list[tuple]) -> list[str]:
    esc = html.escape
    out: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            out.append(f"<h2>{esc(block[1])}</h2>")
        elif kind == "p":
            out.append(f"<p>{esc(block[1])}</p>")
        elif kind == "table":
            out.append(_html_table(block[1], block[2]))
        elif kind == "img":
            out.append(f"<p><img src='{esc(block[1])}' alt='{esc(block[2])}'></p>")
        elif kind == "folded":
            out.append(f"<details><summary>{esc(block[1])}: not answered by these trials</summary>"
                       f"<p>{esc(block[2])}</p></details>")
        else:
            out.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in block[1]) + "</ul>")
    return out


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(_md_cell(c) for c in cells) + " |" for cells in rows])


def markdown_page(parts: ReportParts) -> str:
    before, after = body_blocks(parts)
    lines = [f"# {TITLE}"] + _blocks_md(before)
    lines += ["## What the numbers mean", ""] + [f"- **{term}**: {text}" for term, text in METRICS]
    lines += _blocks_md(after)
    lines += ["", "## Gallery", ""]
    if parts.gallery_note:
        lines += [parts.gallery_note, ""]
    if not parts.gallery and parts.gallery_note is None:
        lines += ["No move of any adversary changed an answer, so there is nothing to show."]
    for entry in parts.gallery:
        lines += [_md_cell(gallery_line(entry)), "", f"![{entry['item_id']}]({entry['image']})", ""]
    if parts.failed:
        lines += ["", "## Failed trials", ""] + [f"- {failed_line(r)}" for r in parts.failed]
    if parts.run_info:
        lines += ["", "## How these trials were made", ""] + [f"- {term}: {text}" for term, text in
                                                             provenance_lines(parts.run_info)]
    return "\n".join(lines) + "\n"


_STYLE = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 12px}"
          "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
          "img{max-width:100%}dt{font-weight:bold}dd{margin:0 0 6px 20px}figure{margin:16px 0}"
          "figcaption{font-size:14px;margin-top:4px}.note{color:#555}")


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>" for cells in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def html_page(parts: ReportParts) -> str:
    esc = html.escape
    before, after = body_blocks(parts)
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{TITLE}</title>",
           f"<style>{_STYLE}</style></head><body>", f"<h1>{TITLE}</h1>"] + _blocks_html(before)
    out += ["<h2>What the numbers mean</h2><dl>"]
    out += [f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in METRICS] + ["</dl>"]
    out += _blocks_html(after)
    out += ["<h2>Gallery</h2>"]
    if parts.gallery_note:
        out += [f"<p class='note'>{esc(parts.gallery_note)}</p>"]
    if not parts.gallery and parts.gallery_note is None:
        out += ["<p>No move of any adversary changed an answer, so there is nothing to show.</p>"]
    for entry in parts.gallery:
        outcome = "right answer broken" if entry["dropped"] else "answer changed"
        out += [f"<figure><img src='{esc(entry['image'])}' alt='{esc(entry['item_id'])} before and after'>"
                f"<figcaption><b>{esc(entry['question'])}</b><br>true answer: {esc(entry['true'])}; "
                f"before: {esc(entry['old'])}; after: {esc(entry['new'])} ({outcome})<br>"
                f"{esc(entry['player'])}, item {esc(entry['item_id'])} ({esc(entry['trial'])}); "
                f"moved: {esc(', '.join(entry['moved']))}</figcaption></figure>"]
    if parts.failed:
        out += ["<h2>Failed trials</h2><ul>"] + [f"<li>{esc(failed_line(r))}</li>" for r in parts.failed] + ["</ul>"]
    if parts.run_info:
        out += ["<h2>How these trials were made</h2><ul>"] + [
            f"<li>{esc(term)}: {esc(text)}</li>" for term, text in provenance_lines(parts.run_info)] + ["</ul>"]
    out += ["</body></html>"]
    return "\n".join(out) + "\n"
