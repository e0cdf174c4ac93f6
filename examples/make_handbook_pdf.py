"""Writes examples/handbook/security/access-and-incidents.pdf (two pages) with fpdf2 (the dev extra).

The PDF is committed; run this only to change its text: ``.venv/bin/python examples/make_handbook_pdf.py``.
"""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF

OUT = Path(__file__).parent / "handbook" / "security" / "access-and-incidents.pdf"
PAGES = [
    ("Access to systems", [
        "Every employee gets an account on their first day, with access only to the tools their "
        "team needs. Access to the payment provider's dashboard is limited to support leads and "
        "finance.",
        "Passwords are at least 14 characters long and kept in the company password manager. "
        "Two-factor authentication is required for e-mail, the HR tool and the payment provider.",
        "To request access to another system, open a ticket with IT naming the system and the "
        "reason; your manager approves it. Access is reviewed every quarter and removed on the "
        "last working day of anyone who leaves.",
    ]),
    ("Reporting a security incident", [
        "Report a lost laptop or phone, a phishing e-mail you clicked, or a customer account "
        "used by someone else at once to security@northwind.example, or by phone outside office "
        "hours. Do not try to investigate yourself.",
        "Security answers within one hour, decides whether customer data may be affected, and, "
        "when it is, informs the data protection authority within 72 hours.",
        "After every incident, security writes a short review: what happened, what was affected, "
        "and what changes so that it does not happen again.",
    ]),
]


def main() -> None:
    pdf = FPDF()
    pdf.set_title("Security: access and incidents")
    pdf.set_author("Northwind")
    for heading, paragraphs in PAGES:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 16)
        pdf.multi_cell(0, 10, heading)
        pdf.set_font("Helvetica", size=11)
        for text in paragraphs:
            pdf.ln(3)
            pdf.multi_cell(0, 6, text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(OUT))
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
