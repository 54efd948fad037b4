"""Write the household folders (issue 46): `python tests/data/household/make_files.py` rewrites `kb/` here.

Invented people and data. ana's folder holds mail (.eml), markdown notes, a CSV of expenses, an XLSX of orders
and PDF receipts; bruno's folder (another user) holds payments to the same roofer and garage, which an answer in
ana's scope must never count. The text is fixed; only the XLSX's and PDF's timestamps may differ between runs.
"""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "helpers"))

ANA = "kb/users/ana/"
BRUNO = "kb/users/bruno/"


def _mail(sender: str, date: str, subject: str, body: str) -> str:
    message_id = hashlib.sha256(subject.encode()).hexdigest()[:12]
    return (f"From: {sender}\nTo: Ana Duarte <ana@home.example>\nDate: {date}\nSubject: {subject}\n"
            f"Message-ID: <{message_id}@mail.example>\nContent-Type: text/plain; charset=utf-8\n\n{body}\n")


def _note(title: str, body: str, date: str | None = None, tags: tuple[str, ...] = ()) -> str:
    front = []
    if date:
        front.append(f"date: {date}")
    if tags:
        front.append(f"tags: [{', '.join(tags)}]")
    head = "---\n" + "\n".join(front) + "\n---\n" if front else ""
    return f"{head}# {title}\n\n{body}\n"


TEXT: dict[str, str] = {
    # The roofer: three payments in 2025 (one stated twice: the invoice and the note), one in 2024, one mention
    # without an amount.
    ANA + "mail/2025-03-04-roofer-invoice-118.eml": _mail(
        "Costa Roofing <billing@costaroofing.example>", "Tue, 04 Mar 2025 09:12:00 +0000",
        "Roofer invoice 118 - north slope repair",
        "Dear Ana,\n\nPlease find invoice 118 for the repair of the north slope of the roof. Amount due: "
        "€1,250.00, payable by 20 March 2025.\n\nCosta Roofing"),
    ANA + "notes/house/roof.md": _note(
        "Roof", "The north slope leaked again after the February storms. Paid the roofer's invoice 118, €1,250.00, "
        "by bank transfer on 20 March 2025. He says the tiles should last another ten years.",
        "2025-03-21", ("house",)),
    ANA + "mail/2025-07-10-roofer-gutters.eml": _mail(
        "Costa Roofing <billing@costaroofing.example>", "Thu, 10 Jul 2025 16:40:00 +0000",
        "Roofer: gutters and two tiles",
        "Hi Ana,\n\nGutters cleaned and two tiles replaced today. Invoice 131: €340.00, paid on 10 July 2025 by "
        "card. Thank you!\n\nCosta Roofing"),
    ANA + "notes/house/skylight.md": _note(
        "Skylight", "The roofer from Costa Roofing looked at the skylight; he will send a quote next week.",
        "2025-05-02", ("house",)),
    ANA + "notes/house/2024-11-storm.md": _note(
        "Storm damage", "Paid the roofer €900.00 on 15 November 2024 for the storm repair of the ridge tiles.",
        "2024-11-16", ("house",)),
    # The garage: three visits in 2025, one in 2024, its address without a date or an amount.
    ANA + "mail/2025-01-14-garage-service.eml": _mail(
        "Ramos Garage <service@ramosgarage.example>", "Tue, 14 Jan 2025 17:05:00 +0000",
        "Your car service at Ramos Garage",
        "Hello Ana,\n\nThe car's annual service at the garage was done on 14 January 2025: oil, filters and brake "
        "fluid. Total: €210.00.\n\nRamos Garage"),
    ANA + "notes/car/tyres.md": _note(
        "Tyres", "Took the car to the garage on 6 May 2025 for four new tyres; €360.00 paid at the counter.",
        "2025-05-06", ("car",)),
    ANA + "notes/car/inspection.md": _note(
        "Inspection", "The car passed its inspection at the garage on 18 September 2025. The fee was €45.00.",
        "2025-09-18", ("car",)),
    ANA + "notes/car/2024-clutch.md": _note(
        "Clutch", "The car went to the garage on 2 August 2024 for a new clutch: €620.00.", "2024-08-02", ("car",)),
    ANA + "notes/car/garage-contact.md": _note(
        "Garage", "The garage is on Rua das Flores 12; ask for Rui at the desk.", None, ("car",)),
    # The dentist: one payment in euros, one in pounds, one mention without an amount.
    ANA + "notes/health/dentist.md": _note(
        "Dentist", "Paid the dentist €85.00 on 10 April 2025 for the check-up and cleaning.", "2025-04-10"),
    ANA + "mail/2025-08-19-dentist-london.eml": _mail(
        "Smile Clinic <desk@smileclinic.example>", "Tue, 19 Aug 2025 12:00:00 +0000",
        "Your dentist appointment in London",
        "Dear Ms Duarte,\n\nThank you for visiting the dentist at Smile Clinic. £60.00 paid on 19 August 2025 for "
        "the emergency filling.\n\nSmile Clinic, London"),
    ANA + "notes/health/dentist-next.md": _note(
        "Dentist again", "Book the dentist again for the autumn check-up.", "2025-09-01"),
    # Insurance: the home renewal stated twice (mail and note), the car's once.
    ANA + "mail/2025-01-30-home-insurance.eml": _mail(
        "Fidelis Insurance <noreply@fidelis.example>", "Thu, 30 Jan 2025 08:00:00 +0000",
        "Your home insurance renewal",
        "Dear customer,\n\nYour home insurance renews for another year. €312.00 will be debited on 1 February "
        "2025.\n\nFidelis Insurance"),
    ANA + "notes/money/insurance.md": _note(
        "Insurance", "Home insurance renewed: €312.00 paid on 1 February 2025. Compare quotes next January.",
        "2025-02-02", ("money",)),
    ANA + "mail/2025-06-15-car-insurance.eml": _mail(
        "Fidelis Insurance <noreply@fidelis.example>", "Sun, 15 Jun 2025 08:00:00 +0000",
        "Car insurance payment",
        "Dear customer,\n\nYour car insurance payment of €289.00 was taken on 15 June 2025.\n\nFidelis Insurance"),
    # Dana's e-mails and another sender's.
    ANA + "mail/2025-02-11-book-club.eml": _mail(
        "Dana Reyes <dana@friends.example>", "Tue, 11 Feb 2025 19:30:00 +0000", "Book club moves",
        "Hi Ana,\n\nThe book club moves to Thursday this month; bring the Le Guin.\n\nDana"),
    ANA + "mail/2025-06-02-plants.eml": _mail(
        "Dana Reyes <dana@friends.example>", "Mon, 02 Jun 2025 10:15:00 +0000", "Your plants",
        "Hi Ana,\n\nI can water your plants while you are away in June. Leave the key with the neighbour.\n\nDana"),
    ANA + "mail/2025-04-15-bank.eml": _mail(
        "Banco Norte <alerts@banconorte.example>", "Tue, 15 Apr 2025 07:00:00 +0000", "Your statement is ready",
        "Dear customer,\n\nYour April statement is ready in the app.\n\nBanco Norte"),
    # Places: Madrid and Porto.
    ANA + "notes/trips/madrid.md": _note(
        "Madrid weekend", "Three days in Madrid in April: the Prado in the morning, tapas in La Latina at night.",
        "2025-04-22", ("trips",)),
    ANA + "notes/trips/porto-2024.md": _note(
        "Porto", "A weekend in Porto with Bruno's family; the port cellars in Gaia and a walk by the river.",
        "2024-10-12", ("trips",)),
    ANA + "notes/work/conference.md": _note(
        "Conference", "The next data conference is in Madrid, so book the hotel early. Priya is speaking.",
        "2025-05-30"),
    ANA + "notes/food/francesinha.md": _note(
        "Francesinha", "The best francesinha we had was at Café Santiago in Porto, with a cold beer.",
        "2024-10-13"),
    ANA + "notes/trips/iberia-ideas.md": _note(
        "Iberia ideas", "The night train from Madrid to Porto no longer runs; fly or drive instead.", "2025-01-05",
        ("trips",)),
    ANA + "notes/trips/lisbon.md": _note(
        "Lisbon", "Four nights in Lisbon in Alfama; tram 28 up the hill every morning.", "2023-06-01",
        ("trips",)),
    # The harbour.
    ANA + "notes/walks/cascais.md": _note(
        "Cascais walk", "Walked round the harbour at Cascais and back along the sea wall to Estoril.",
        "2025-03-02"),
    ANA + "notes/boats.md": _note(
        "Ferry", "The ferry to the island leaves from the harbour at nine; buy tickets on board.", "2025-07-20"),
    # Garden tags, and a note that only talks about tags.
    ANA + "notes/garden/tomatoes.md": _note(
        "Tomatoes", "Stake the tomatoes by June; the San Marzano plants split after heavy rain.", "2025-06-01",
        ("garden",)),
    ANA + "notes/garden/compost.md": _note(
        "Compost", "Turn the compost every two weeks and keep it damp.", "2025-04-01", ("garden", "compost")),
    ANA + "notes/garden/seeds.md": _note(
        "Seeds", "Sow the beans in May after the last frost.", "2025-03-15", ("garden",)),
    ANA + "notes/misc/blog-idea.md": _note(
        "Blog idea", "Write a post on how I use tags like garden, house and recipes to sort my notes.",
        "2025-08-01"),
    # Bruno: the same roofer and garage, other amounts. Never counted in ana's scope.
    BRUNO + "notes/roof.md": _note(
        "Roof", "Paid the roofer €5,000.00 on 3 June 2025 for the whole new roof.", "2025-06-03", ("house",)),
    BRUNO + "notes/garage.md": _note(
        "Garage", "The car went to the garage on 9 May 2025; €1,100.00 for the gearbox.", "2025-05-09", ("car",)),
    BRUNO + "notes/trips/porto.md": _note("Porto", "Porto again for the São João festival.", "2025-06-24"),
}

EXPENSES = [  # date, shop, category, amount (EUR)
    ("2025-02-27", "Pingo Doce", "groceries", "54.20"),
    ("2025-03-03", "Pingo Doce", "groceries", "61.35"),
    ("2025-03-09", "Lidl", "groceries", "38.90"),
    ("2025-03-15", "Farmacia Central", "pharmacy", "12.40"),
    ("2025-03-22", "Lidl", "groceries", "44.15"),
    ("2025-03-29", "Mercado do Bolhao", "groceries", "23.60"),
    ("2025-04-02", "Pingo Doce", "groceries", "58.00"),
    ("2025-04-05", "EDP", "electricity", "71.30"),
    ("2025-04-12", "Lidl", "groceries", "40.10"),
    ("2025-05-10", "EDP", "electricity", "68.90"),
    ("2025-06-07", "EDP", "electricity", "64.20"),
    ("2025-06-20", "Lidl", "groceries", "35.75"),
    ("2025-07-03", "Livraria Bertrand", "books", "27.50"),
]
ORDERS = [  # order, item, shop, status, total (EUR)
    (1001, "garden hose", "Leroy", "delivered", 29.99),
    (1002, "desk lamp", "Ikea", "open", 45.00),
    (1003, "wall paint", "Leroy", "open", 62.50),
    (1004, "rain boots", "Decathlon", "returned", 39.99),
    (1005, "bookshelf", "Ikea", "open", 129.00),
    (1006, "tomato seeds", "Leroy", "delivered", 12.40),
]
BILL = ["EDP - electricity bill", "Billing period: October 2025", "Customer: Ana Duarte",
        "Electricity used: 212 kWh. Amount due: EUR 73.40, paid on 20 November 2025 by direct debit."]
RECEIPT = ["Costa Roofing - receipt", "Your roofer since 1998",
           "Received from Ana Duarte on 2 October 2025 the sum of EUR 480.00 for the chimney flashing."]


def _xlsx() -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Orders"
    sheet.append(["order", "item", "shop", "status", "total (EUR)"])
    for row in ORDERS:
        sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def files() -> dict[str, str | bytes]:
    """{path under this folder: content} of every file of the household folders."""
    from pdf_writer import make_pdf

    csv = "date,shop,category,amount (EUR)\n" + "".join(",".join(row) + "\n" for row in EXPENSES)
    return {**TEXT, ANA + "sheets/expenses-2025.csv": csv, ANA + "sheets/orders.xlsx": _xlsx(),
            ANA + "pdf/2025-11-20-edp-bill.pdf": make_pdf(["\n".join(BILL)], title="EDP bill October 2025"),
            ANA + "pdf/2025-10-02-roofer-receipt.pdf": make_pdf(["\n".join(RECEIPT)], title="Costa Roofing receipt")}


if __name__ == "__main__":
    for rel, content in files().items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    print(f"wrote {len(files())} files under {HERE / 'kb'}")
