"""Writers for a folder holding every format cairn ingests (used by the docs_ingest benchmark and by
the ingestion tests). Binary formats are written with their own libraries (fpdf2, python-docx,
python-pptx, openpyxl: the ``docs`` extra plus fpdf2), so the files are real, not mock-ups."""

from __future__ import annotations

import csv
import json
import random
from email.message import EmailMessage
from pathlib import Path

WORDS = (
    "account billing invoice refund customer order shipping warehouse supplier contract renewal policy "
    "security audit backup server network latency incident review release roadmap budget forecast "
    "quarter revenue margin hiring onboarding training laptop badge office travel expense approval "
    "manager report dashboard metric alert on-call runbook deploy rollback database index cache queue"
).split()


def sentences(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def write_pdf(path: Path, pages: list[str], title: str = "") -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(True, margin=15)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))


def write_docx(path: Path, title: str, sections: list[tuple[str, str]], table: list[list[str]] | None = None) -> None:
    import docx

    d = docx.Document()
    d.core_properties.title = title
    d.add_heading(title, level=1)
    for heading, body in sections:
        d.add_heading(heading, level=2)
        d.add_paragraph(body)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                t.cell(r, c).text = value
    d.save(str(path))


def write_pptx(path: Path, slides: list[tuple[str, str]]) -> None:
    from pptx import Presentation

    deck = Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(path))


def write_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    wb.save(str(path))


def write_eml(path: Path, subject: str, body: str, sender: str = "ops@example.com") -> None:
    msg = EmailMessage()
    msg["Subject"] = subject
    msg["From"] = sender
    msg["To"] = "team@example.com"
    msg["Date"] = "Tue, 01 Dec 2026 09:00:00 +0000"
    msg.set_content(body)
    path.write_bytes(bytes(msg))


def write_html(path: Path, title: str, sections: list[tuple[str, str]]) -> None:
    body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in sections)
    path.write_text(
        f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a> | <a href='/x'>Shop</a></nav>"
        f"<main><article><h1>{title}</h1>{body}</article></main><footer>Copyright 2026. Privacy. Cookies.</footer>"
        "</body></html>"
    )


def write_one_of_each(root: Path, rng: random.Random | None = None, prefix: str = "") -> list[Path]:
    """One file of every format (small); returns their paths."""
    rng = rng or random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    p = lambda name: root / f"{prefix}{name}"  # noqa: E731
    files = []
    write_pdf(p("report.pdf"), [sentences(rng, 12) for _ in range(3)], "Quarterly report")
    write_docx(p("handbook.docx"), "Team handbook", [("Hiring", sentences(rng, 6)), ("Laptops", sentences(rng, 6))],
               [["Item", "Owner"], ["Badge", "Security"], ["Laptop", "IT"]])
    write_pptx(p("roadmap.pptx"), [("Roadmap", sentences(rng, 4)), ("Budget", sentences(rng, 4))])
    write_xlsx(p("budget.xlsx"), {"Q1": [["team", "spend"], ["ops", 120], ["sales", 340]], "Q2": [["team", "spend"], ["ops", 150]]})
    write_html(p("policy.html"), "Refund policy", [("Window", sentences(rng, 5)), ("Exceptions", sentences(rng, 5))])
    write_eml(p("incident.eml"), "Incident review", sentences(rng, 8))
    with open(p("orders.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["order", "customer", "status"])
        for i in range(30):
            w.writerow([i, rng.choice(WORDS), rng.choice(["open", "shipped", "refunded"])])
    p("orders.tsv").write_text("order\tcustomer\n" + "".join(f"{i}\t{rng.choice(WORDS)}\n" for i in range(20)))
    p("service.yaml").write_text("service:\n  name: billing\n  replicas: 3\nalerts:\n  - latency\n  - errors\n")
    p("catalog.xml").write_text("<catalog><item id='a1'><name>Laptop</name><price>900</price></item>"
                                "<item id='b2'><name>Badge</name><price>5</price></item></catalog>")
    p("deploy.py").write_text('"""Deploy helpers."""\nimport os\n\n\ndef deploy(env):\n    """Deploy to env."""\n    return env\n\n\n'
                              'class Rollback:\n    def run(self):\n        return True\n')
    p("client.js").write_text("import x from 'y';\n\nfunction fetchOrders(id) {\n  return id;\n}\n\nclass Cart {\n  add(item) { return item; }\n}\n")
    p("notes.md").write_text("# Notes\n\n" + sentences(rng, 6) + "\n\n## More\n\n" + sentences(rng, 6) + "\n")
    p("readme.txt").write_text(sentences(rng, 5) + "\n")
    p("faq.json").write_text(json.dumps({"title": "FAQ", "text": sentences(rng, 4)}))
    files = sorted(root.iterdir())
    return files
