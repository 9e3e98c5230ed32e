#!/usr/bin/env python3
# defines: generator of src/text/bert_unicode_tables.cpp, the places where BERT's two reference tokenizers
# disagree with utf8proc's Unicode 15 tables.
#
# Run with Debian 12's /usr/bin/python3 (3.11, unicodedata = Unicode 14, the runtime Megatron's Google BERT code
# was measured with), libutf8proc 2.8 (Unicode 15) and perl's Unicode::UCD (for the Age property):
#   /usr/bin/python3 scripts/gen_bert_unicode_tables.py > src/text/bert_unicode_tables.cpp
import ctypes
import subprocess
import unicodedata

U = ctypes.CDLL("libutf8proc.so.2")
U.utf8proc_category.restype = ctypes.c_int
U.utf8proc_unicode_version.restype = ctypes.c_char_p
assert U.utf8proc_unicode_version() == b"15.0.0", U.utf8proc_unicode_version()
assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
CATS = "Cn Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co".split()
ALL = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def role(cat):
    """What BERT's basic tokenizer does with a category: delete, space, split, strip, or keep in the word."""
    if cat in ("Cc", "Cf", "Co"):
        return "ctrl"
    if cat == "Zs":
        return "space"
    if cat[0] == "P":
        return "punct"
    if cat == "Mn":
        return "mark"
    return "plain"


def ranges(cps):
    out = []
    for cp in sorted(cps):
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def emit(name, why, cps):
    print(f"// {why}")
    print(f"extern const CodeRange {name}[] = {{")
    rs = ranges(cps)
    for i in range(0, len(rs), 6):
        print("    " + " ".join(f"{{0x{a:X}, 0x{b:X}}}," for a, b in rs[i:i + 6]))
    print("};")
    print(f"extern const size_t {name}_size = {len(rs)};\n")


u15 = {cp: CATS[U.utf8proc_category(cp)] for cp in ALL}

# Google flavour: Python 3.11's unicodedata (Unicode 14) says Cn for characters that Unicode 15 made P*, Mn or Cf;
# Google's code therefore keeps them inside words. (Lower-casing and NFD agree everywhere: checked here.)
google_plain = []
for cp in ALL:
    py = unicodedata.category(chr(cp))
    if role(py) != role(u15[cp]) and not (py == "Co" and u15[cp] == "Co"):
        assert py == "Cn", (hex(cp), py, u15[cp])
        google_plain.append(cp)

# Hugging Face flavour: the unicode_categories crate behind HF's BERT normalizer has Unicode 8.0 tables, so every
# character assigned later is "unassigned" there: never deleted, split off or stripped.
inv = [int(x) for x in subprocess.check_output(
    ["perl", "-MUnicode::UCD=prop_invlist", "-e", 'print join(" ", prop_invlist("In=8.0"))']).split()]
in8 = set()
for i in range(0, len(inv), 2):
    in8.update(range(inv[i], inv[i + 1] if i + 1 < len(inv) else 0x110000))
hf_plain = [cp for cp in ALL if cp not in in8 and role(u15[cp]) != "plain"]

# Final sigma (Python's str.lower()): Σ becomes ς after a cased letter (skipping case-ignorable characters) when
# no cased letter follows (again skipping case-ignorable ones). Python does not expose the two properties; read
# them off its behaviour: a character is skipped iff "A"+c+"Σ" ends in ς but c+"Σ" does not.
cased, ignorable = [], []
for cp in ALL:
    c = chr(cp)
    after_cased = ("A" + c + "\u03a3").lower()[-1] == "\u03c2"
    alone = (c + "\u03a3").lower()[-1] == "\u03c2"
    if alone:
        cased.append(cp)
    elif after_cased:
        ignorable.append(cp)

print("// defines: generated Unicode exception tables for BERT WordPiece (scripts/gen_bert_unicode_tables.py); "
      "do not edit")
print('#include "text/bert_unicode.h"\n')
print("namespace lmforge::text::bert {\n")
emit("kGoogleUnassigned", "Unicode 15 additions that Python 3.11 (Unicode 14) still calls Cn.", google_plain)
emit("kHfUnassigned", "Post-Unicode-8.0 characters that are P*, Mn, Cf, Cc or Co today (HF's tables: Cn).", hf_plain)
emit("kPyCased", "Python 3.11: cased characters that are not case-ignorable.", cased)
emit("kPyCaseIgnorable", "Python 3.11: case-ignorable characters (skipped around a final sigma).", ignorable)
print("}  // namespace lmforge::text::bert")
