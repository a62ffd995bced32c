"""Confusable letters of other scripts fold to the Latin letters they look like in ``brain_content_key``.

``brain_fold_confusables(text)`` replaces each character of ``FOLD`` (a non-ASCII letter or digit drawn
like an ASCII one: Cyrillic "а", Greek "ο", ...; TR39's prototypes restricted to one ASCII letter or
digit) by that ASCII character, in O(length); ASCII text (as many bytes as characters) is returned as
it is.
``FOLD`` is ``brain.confusables.fold_table()`` as it was written here (from confusable-homoglyphs
3.3.1); ``tests/security/test_homoglyphs_hold.py`` checks that the two still agree. The key is then the
md5 of the text NFKC-normalised, folded, its whitespace runs collapsed, trimmed and lower-cased: a
corrected fact or a live thought sent again with look-alike letters has the key of the original.
The two indexes on the key are rebuilt with it.
"""

import json

from django.db import migrations

FOLD = {
    "\u00d7": "x", "\u0131": "i", "\u0184": "b", "\u018d": "g", "\u0196": "I", "\u01a6": "R", "\u01a7": "2",
    "\u01b7": "3", "\u01bc": "5", "\u01bd": "s", "\u01c0": "l", "\u021c": "3", "\u0222": "8", "\u0223": "8",
    "\u0251": "a", "\u0261": "g", "\u0263": "y", "\u0269": "i", "\u026a": "i", "\u026f": "w", "\u028b": "u",
    "\u028f": "y", "\u037f": "J", "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H",
    "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T",
    "\u03a5": "Y", "\u03a7": "X", "\u03b1": "a", "\u03b3": "y", "\u03b9": "i", "\u03bd": "v", "\u03bf": "o",
    "\u03c1": "p", "\u03c3": "o", "\u03c5": "u", "\u03dc": "F", "\u03e8": "2", "\u03f3": "j", "\u03fa": "M",
    "\u0405": "S", "\u0406": "I", "\u0408": "J", "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u0417": "3",
    "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C", "\u0422": "T",
    "\u0423": "Y", "\u0425": "X", "\u042c": "b", "\u0430": "a", "\u0431": "6", "\u0433": "r", "\u0435": "e",
    "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x", "\u0455": "s", "\u0456": "i",
    "\u0458": "j", "\u0461": "w", "\u0474": "V", "\u0475": "v", "\u04ae": "Y", "\u04af": "y", "\u04bb": "h",
    "\u04bd": "e", "\u04c0": "I", "\u04cf": "i", "\u04e0": "3", "\u0501": "d", "\u050c": "G", "\u051b": "q",
    "\u051c": "W", "\u051d": "w", "\u054d": "U", "\u054f": "S", "\u0555": "O", "\u0561": "w", "\u0563": "q",
    "\u0566": "q", "\u0570": "h", "\u0578": "n", "\u057c": "n", "\u057d": "u", "\u0581": "g", "\u0584": "f",
    "\u0585": "o", "\u06f1": "l", "\u06f5": "o", "\u06f7": "V", "\u0966": "o", "\u09e6": "O", "\u09ea": "8",
    "\u09ed": "9", "\u0a66": "o", "\u0a67": "9", "\u0a6a": "8", "\u0ae6": "o", "\u0b03": "8", "\u0b20": "O",
    "\u0b66": "O", "\u0b68": "9", "\u0be6": "o", "\u0c02": "o", "\u0c66": "o", "\u0c82": "o", "\u0ce6": "o",
    "\u0d02": "o", "\u0d20": "o", "\u0d66": "o", "\u0d6d": "9", "\u0d82": "o", "\u0e50": "o", "\u0ed0": "o",
    "\u101d": "o", "\u1040": "o", "\u10e7": "y", "\u10ff": "o", "\u1200": "U", "\u12d0": "O", "\u13a0": "D",
    "\u13a1": "R", "\u13a2": "T", "\u13a5": "i", "\u13a9": "Y", "\u13aa": "A", "\u13ab": "J", "\u13ac": "E",
    "\u13b3": "W", "\u13b7": "M", "\u13bb": "H", "\u13bd": "Y", "\u13c0": "G", "\u13c2": "h", "\u13c3": "Z",
    "\u13ce": "4", "\u13cf": "b", "\u13d2": "R", "\u13d4": "W", "\u13d5": "S", "\u13d9": "V", "\u13da": "S",
    "\u13de": "L", "\u13df": "C", "\u13e2": "P", "\u13e6": "K", "\u13e7": "d", "\u13ee": "6", "\u13f3": "G",
    "\u13f4": "B", "\u142f": "V", "\u144c": "U", "\u146d": "P", "\u146f": "d", "\u1472": "b", "\u148d": "J",
    "\u14aa": "L", "\u14bf": "2", "\u1541": "x", "\u157c": "H", "\u157d": "x", "\u1587": "R", "\u15af": "b",
    "\u15b4": "F", "\u15c5": "A", "\u15de": "D", "\u15ea": "D", "\u15f0": "M", "\u15f7": "B", "\u166d": "X",
    "\u166e": "x", "\u16b7": "X", "\u16c1": "l", "\u16d5": "K", "\u16d6": "M", "\u1d04": "c", "\u1d0f": "o",
    "\u1d11": "o", "\u1d1c": "u", "\u1d20": "v", "\u1d21": "w", "\u1d22": "z", "\u1d26": "r", "\u1d83": "g",
    "\u1d8c": "y", "\u1e9d": "f", "\u1eff": "y", "\u212e": "e", "\u2223": "l", "\u2228": "v", "\u222a": "U",
    "\u22a4": "T", "\u22c1": "v", "\u22c3": "U", "\u22ff": "E", "\u2373": "i", "\u2374": "p", "\u237a": "a",
    "\u23fd": "l", "\u2573": "X", "\u27d9": "T", "\u292b": "x", "\u292c": "x", "\u2a2f": "x", "\u2c85": "r",
    "\u2c8e": "H", "\u2c92": "l", "\u2c94": "K", "\u2c98": "M", "\u2c9a": "N", "\u2c9e": "O", "\u2c9f": "o",
    "\u2ca2": "P", "\u2ca3": "p", "\u2ca4": "C", "\u2ca5": "c", "\u2ca6": "T", "\u2ca8": "Y", "\u2cac": "X",
    "\u2cca": "9", "\u2ccc": "3", "\u2cd0": "L", "\u2cd2": "6", "\u2d38": "V", "\u2d39": "E", "\u2d4f": "l",
    "\u2d54": "O", "\u2d55": "Q", "\u2d5d": "X", "\u3007": "O", "\ua4d0": "B", "\ua4d1": "P", "\ua4d2": "d",
    "\ua4d3": "D", "\ua4d4": "T", "\ua4d6": "G", "\ua4d7": "K", "\ua4d9": "J", "\ua4da": "C", "\ua4dc": "Z",
    "\ua4dd": "F", "\ua4df": "M", "\ua4e0": "N", "\ua4e1": "L", "\ua4e2": "S", "\ua4e3": "R", "\ua4e6": "V",
    "\ua4e7": "H", "\ua4ea": "W", "\ua4eb": "X", "\ua4ec": "Y", "\ua4ee": "A", "\ua4f0": "E", "\ua4f2": "l",
    "\ua4f3": "O", "\ua4f4": "U", "\ua644": "2", "\ua647": "i", "\ua6df": "V", "\ua6ef": "2", "\ua731": "s",
    "\ua75a": "2", "\ua76a": "3", "\ua76e": "9", "\ua798": "F", "\ua799": "f", "\ua79f": "u", "\ua7ab": "3",
    "\ua7b2": "J", "\ua7b3": "X", "\ua7b4": "B", "\uab32": "e", "\uab35": "f", "\uab3d": "o", "\uab47": "r",
    "\uab48": "r", "\uab4e": "u", "\uab52": "u", "\uab5a": "y", "\uab75": "i", "\uab81": "r", "\uab83": "w",
    "\uab93": "z", "\uaba9": "v", "\uabaa": "s", "\uabaf": "c", "\ud800\ude82": "B", "\ud800\ude86": "E",
    "\ud800\ude87": "F", "\ud800\ude8a": "l", "\ud800\ude90": "X", "\ud800\ude92": "O", "\ud800\ude95": "P",
    "\ud800\ude96": "S", "\ud800\ude97": "T", "\ud800\udea0": "A", "\ud800\udea1": "B", "\ud800\udea2": "C",
    "\ud800\udea5": "F", "\ud800\udeab": "O", "\ud800\udeb0": "M", "\ud800\udeb1": "T", "\ud800\udeb2": "Y",
    "\ud800\udeb4": "X", "\ud800\udecf": "H", "\ud800\udef5": "Z", "\ud800\udf01": "B", "\ud800\udf02": "C",
    "\ud800\udf09": "l", "\ud800\udf11": "M", "\ud800\udf15": "T", "\ud800\udf17": "X", "\ud800\udf1a": "8",
    "\ud800\udf20": "l", "\ud800\udf22": "X", "\ud801\udc04": "O", "\ud801\udc15": "C", "\ud801\udc1b": "L",
    "\ud801\udc20": "S", "\ud801\udc2c": "o", "\ud801\udc3d": "c", "\ud801\udc48": "s", "\ud801\udcb4": "R",
    "\ud801\udcc2": "O", "\ud801\udcce": "U", "\ud801\udcd2": "7", "\ud801\udcea": "o", "\ud801\udcf6": "u",
    "\ud801\udd13": "N", "\ud801\udd16": "O", "\ud801\udd18": "K", "\ud801\udd1c": "C", "\ud801\udd1d": "V",
    "\ud801\udd25": "F", "\ud801\udd26": "L", "\ud801\udd27": "X", "\ud805\udcd0": "O", "\ud805\udf06": "v",
    "\ud805\udf0a": "w", "\ud805\udf0e": "w", "\ud805\udf0f": "w", "\ud806\udca0": "V", "\ud806\udca2": "F",
    "\ud806\udca3": "L", "\ud806\udca4": "Y", "\ud806\udca6": "E", "\ud806\udca9": "Z", "\ud806\udcac": "9",
    "\ud806\udcae": "E", "\ud806\udcaf": "4", "\ud806\udcb2": "L", "\ud806\udcb5": "O", "\ud806\udcb8": "U",
    "\ud806\udcbb": "5", "\ud806\udcbc": "T", "\ud806\udcc0": "v", "\ud806\udcc1": "s", "\ud806\udcc2": "F",
    "\ud806\udcc3": "i", "\ud806\udcc4": "z", "\ud806\udcc6": "7", "\ud806\udcc8": "o", "\ud806\udcca": "3",
    "\ud806\udccc": "9", "\ud806\udcd5": "6", "\ud806\udcd6": "9", "\ud806\udcd7": "o", "\ud806\udcd8": "u",
    "\ud806\udcdc": "y", "\ud806\udce0": "O", "\ud806\udce5": "Z", "\ud806\udce6": "W", "\ud806\udce9": "C",
    "\ud806\udcec": "X", "\ud806\udcef": "W", "\ud806\udcf2": "C", "\ud81b\udf08": "V", "\ud81b\udf0a": "T",
    "\ud81b\udf16": "L", "\ud81b\udf28": "l", "\ud81b\udf35": "R", "\ud81b\udf3a": "S", "\ud81b\udf3b": "3",
    "\ud81b\udf40": "A", "\ud81b\udf42": "U", "\ud81b\udf43": "Y", "\ud834\ude06": "3", "\ud834\ude0d": "V",
    "\ud834\ude12": "7", "\ud834\ude13": "F", "\ud834\ude16": "R", "\ud834\ude2a": "L", "\ud83d\udf4c": "C",
    "\ud83d\udf68": "T",
}

CREATE_FOLD = (
    """
CREATE FUNCTION brain_fold_confusables(content text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN octet_length(content) = char_length(content) THEN content ELSE (
        SELECT string_agg(coalesce('"""
    + json.dumps(FOLD)
    + """'::jsonb ->> c, c), '' ORDER BY i)
        FROM unnest(string_to_array(content, NULL)) WITH ORDINALITY AS chars(c, i)
    ) END
"""
)

FOLDED_KEY = r"""
CREATE OR REPLACE FUNCTION brain_content_key(content text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN md5(lower(btrim(regexp_replace(brain_fold_confusables(normalize(content, NFKC)), '\s+', ' ', 'g'))))
"""

PLAIN_KEY = r"""
CREATE OR REPLACE FUNCTION brain_content_key(content text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN md5(lower(btrim(regexp_replace(normalize(content, NFKC), '\s+', ' ', 'g'))))
"""

REINDEX = "REINDEX INDEX thought_space_content_key; REINDEX INDEX thought_space_superseded_key;"


class Migration(migrations.Migration):
    dependencies = [
        ("brain", "0017_thought_superseded_content_key"),
    ]

    operations = [
        migrations.RunSQL(CREATE_FOLD, "DROP FUNCTION brain_fold_confusables(text)"),
        migrations.RunSQL(FOLDED_KEY + ";" + REINDEX, PLAIN_KEY + ";" + REINDEX),
    ]
