#!/usr/bin/env python3
"""Build tasks/data/longtext/docs.jsonl: long natural-language documents for the perplexity tasks.

Source: Debian's ``r-cran-janeaustenr`` 1.0.0-1 (bookworm, section gnu-r, MIT), which ships the full
texts of Jane Austen's six novels (public domain; Project Gutenberg transcriptions, without the
Gutenberg header and licence blocks) as character vectors in an R lazy-load database
(``usr/lib/R/site-library/janeaustenr/data/Rdata.{rdx,rdb}``). This script needs neither R nor dpkg:
it reads the .deb (an ar archive holding data.tar.xz) and R's serialization format itself.

    python tools/make_longtext.py              # apt-get download the pinned .deb, build, verify
    python tools/make_longtext.py --deb F.deb  # use a .deb already at hand
    python tools/make_longtext.py --check      # verify the checked-in docs.jsonl (no network)
    python tools/make_longtext.py --update-manifest   # after changing the selection on purpose

Every step is checked: the .deb's sha256, the sha256 of the two R files inside it, and each built
document's sha256 against tasks/data/longtext/manifest.json. The built jsonl is checked in (1.6 MB),
so tests and the GPU machine need no network; see tasks/data/longtext/README.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tasks" / "data" / "longtext"
DOCS = OUT_DIR / "docs.jsonl"
MANIFEST = OUT_DIR / "manifest.json"

PACKAGE = "r-cran-janeaustenr"
VERSION = "1.0.0-1"
DEB_SHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
R_DIR = "usr/lib/R/site-library/janeaustenr/data"
R_FILES = {  # path inside the package -> sha256
    f"{R_DIR}/Rdata.rdx": "cab8cbe4ce965d3b42b35c03383bafccc0eb78151f70e4748ead45270470c22f",
    f"{R_DIR}/Rdata.rdb": "8fb5198960d0da724b1562f96e4221e5c1b41ff455000280b02c55980c3d8f21",
}
LICENCE = ("package: MIT (Copyright 2016-2017 Julia Silge; debian/* 2021 Andreas Tille); "
           "texts: public domain (Jane Austen, 1811-1818)")

# The package's order (austen_books()): R object name -> title, first-edition year
BOOKS = {
    "sensesensibility": ("Sense and Sensibility", 1811),
    "prideprejudice": ("Pride and Prejudice", 1813),
    "mansfieldpark": ("Mansfield Park", 1814),
    "emma": ("Emma", 1815),
    "northangerabbey": ("Northanger Abbey", 1818),
    "persuasion": ("Persuasion", 1818),
}
# Document sizes in characters. Austen's prose runs 4.25-4.55 characters a token with the SmolLM2
# and Qwen2.5 tokenizers, so these are ~2k, 4k, 8k, 16k and 28-30k tokens: the largest fit a 32k
# context with room to spare.
TARGET_CHARS = (9_000, 18_000, 36_000, 72_000, 126_000)
MAX_CHARS = 130_000  # the cut is at a paragraph end past the target; never beyond this
CHAPTER = re.compile(r"^(CHAPTER|Chapter) [0-9IVXLC]+\.?$")


# ---------------------------------------------------------------- the .deb

def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def download_deb(dest: Path) -> Path:
    subprocess.run(["apt-get", "download", f"{PACKAGE}={VERSION}"], cwd=dest, check=True)
    (deb,) = dest.glob(f"{PACKAGE}_*.deb")
    return deb


def deb_members(deb: bytes, wanted: set[str]) -> dict[str, bytes]:
    """The named files from a .deb's data.tar.* (ar archive: 8-byte magic, 60-byte member headers)."""
    assert deb[:8] == b"!<arch>\n", "not an ar archive"
    pos, data_tar = 8, None
    while pos < len(deb):
        header = deb[pos:pos + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        if name.startswith("data.tar"):
            data_tar = deb[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
    if data_tar is None:
        raise SystemExit("no data.tar.* in the .deb")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data_tar)) as tar:
        for m in tar.getmembers():
            path = m.name.removeprefix("./")
            if path in wanted:
                out[path] = tar.extractfile(m).read()
    missing = wanted - set(out)
    if missing:
        raise SystemExit(f"not in the package: {sorted(missing)}")
    return out


# ---------------------------------------------------------------- R serialization (XDR), the subset used here

class _RReader:
    def __init__(self, b: bytes):
        self.b, self.p, self.refs = b, 0, []

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.b, self.p)
        self.p += 4
        return v

    def raw(self, n: int) -> bytes:
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def length(self) -> int:
        n = self.int()
        return (self.int() << 32) + self.int() if n == -1 else n

    def read(self):
        if self.raw(2) != b"X\n":
            raise ValueError("not R XDR serialization")
        version = self.int()
        self.int(), self.int()  # writer's R version, minimal reader version
        if version == 3:
            self.raw(self.int())  # native encoding
        return self.item()

    def item(self):
        flags = self.int()
        t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if t == 254:  # NILVALUE_SXP
            return None
        if t in (253, 252, 251, 250, 242, 241):  # global/empty/base env, unbound, missing
            return ("special", t)
        if t == 255:  # REFSXP
            return self.refs[(flags >> 8 or self.int()) - 1]
        if t == 1:  # SYMSXP
            sym = ("sym", self.item())
            self.refs.append(sym)
            return sym
        if t in (2, 6):  # LISTSXP, LANGSXP: a chain of (attr, tag, car) cells
            cells = []
            while True:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else None
                cells.append((tag[1] if tag else None, self.item()))
                flags = self.int()
                t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
                if t == 254:
                    return ("pairlist", cells)
                if t not in (2, 6):
                    self.p -= 4
                    cells.append((None, self.item()))
                    return ("pairlist", cells)
        if t == 9:  # CHARSXP
            n = self.int()
            return None if n == -1 else self.raw(n).decode("utf-8")
        if t in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            value = list(struct.unpack_from(f">{n}i", self.b, self.p))
            self.p += 4 * n
        elif t == 14:  # REALSXP
            n = self.length()
            value = list(struct.unpack_from(f">{n}d", self.b, self.p))
            self.p += 8 * n
        elif t in (16, 19, 20):  # STRSXP, VECSXP, EXPRSXP
            value = [self.item() for _ in range(self.length())]
        else:
            raise ValueError(f"R SEXP type {t} is not handled by this reader")
        if has_attr:
            return ("attr", value, dict(self.item()[1]))
        return value


def r_unserialize(b: bytes):
    return _RReader(b).read()


def r_lazyload(rdx: bytes, rdb: bytes) -> dict:
    """The objects of an R lazy-load database: .rdx (gzip'd index) + .rdb (zlib'd blobs at offsets)."""
    _, values, attrs = r_unserialize(gzip.decompress(rdx))
    variables = dict(zip(attrs["names"], values))["variables"]
    _, offsets, vattrs = variables
    out = {}
    for name, (off, length) in zip(vattrs["names"], offsets):
        blob = rdb[off:off + length]  # 4-byte big-endian uncompressed length, then a zlib stream
        out[name] = r_unserialize(zlib.decompress(blob[4:]))
    return out


# ---------------------------------------------------------------- cleaning and cutting

def paragraphs(lines: list[str]) -> list[str]:
    """Hard-wrapped lines -> paragraphs: lines joined with one space, runs of whitespace collapsed,
    Gutenberg's _italics_ underscores removed; editorial notes ("[End volume one ...]") and
    section rules ("* * * * *") dropped."""
    paras, cur = [], []
    for line in [*lines, ""]:
        line = (line or "").strip()
        if line:
            cur.append(line)
        elif cur:
            p = re.sub(r"\s+", " ", " ".join(cur))
            p = re.sub(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])", r"\1", p)
            cur = []
            if re.fullmatch(r"\[.*\]", p) or re.fullmatch(r"[* ]+", p):
                continue
            paras.append(p)
    return paras


def cut(book: str, paras: list[str]) -> list[dict]:
    """Non-overlapping documents from one novel: the k-th starts at the first chapter heading after
    the (k-1)-th ended and takes whole paragraphs until it holds TARGET_CHARS[k] characters."""
    starts = [i for i, p in enumerate(paras) if CHAPTER.match(p)]
    docs, pos = [], 0
    for target in TARGET_CHARS:
        start = next(i for i in starts if i >= pos)
        end, n = start, 0
        while n < target:
            n += len(paras[end]) + (2 if end > start else 0)
            end += 1
        text = "\n\n".join(paras[start:end])
        if len(text) > MAX_CHARS:
            raise SystemExit(f"{book}: a {target}-character document came out at {len(text)} characters")
        title, year = BOOKS[book]
        last_heading = next((paras[i] for i in reversed(starts) if i < end), paras[start])
        docs.append({
            "id": f"{book}-{target // 1000:03d}k",
            "source": f"{PACKAGE} {VERSION}, {R_DIR}/Rdata.rdb object '{book}': Jane Austen, {title} ({year}), "
                      f"paragraphs {start}-{end - 1} ({paras[start]} to {last_heading})",
            "text": text,
            "sha256": sha256_bytes(text.encode("utf-8")),
            "n_chars": len(text),
        })
        pos = end
    return docs


def build(deb_bytes: bytes) -> list[dict]:
    got = sha256_bytes(deb_bytes)
    if got != DEB_SHA256:
        raise SystemExit(f"{PACKAGE} {VERSION}: .deb sha256 {got}, expected {DEB_SHA256}")
    files = deb_members(deb_bytes, set(R_FILES))
    for path, want in R_FILES.items():
        if sha256_bytes(files[path]) != want:
            raise SystemExit(f"{path}: sha256 {sha256_bytes(files[path])}, expected {want}")
    objects = r_lazyload(files[f"{R_DIR}/Rdata.rdx"], files[f"{R_DIR}/Rdata.rdb"])
    per_book = {b: cut(b, paragraphs(objects[b])) for b in BOOKS}
    # smallest first, then the package's book order, so that lm-eval's `limit: N` takes short ones
    return [per_book[b][k] for k in range(len(TARGET_CHARS)) for b in BOOKS]


def manifest_for(docs: list[dict]) -> dict:
    return {
        "package": PACKAGE, "version": VERSION, "archive": "Debian bookworm (main, section gnu-r)",
        "deb_sha256": DEB_SHA256, "files": R_FILES, "licence": LICENCE,
        "built_by": "tools/make_longtext.py", "target_chars": list(TARGET_CHARS),
        "docs_jsonl_sha256": None,  # filled in below
        "docs": [{k: d[k] for k in ("id", "sha256", "n_chars", "source")} for d in docs],
    }


def jsonl(docs: list[dict]) -> bytes:
    return "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")


def check_against_manifest(docs: list[dict], manifest: dict) -> list[str]:
    problems = []
    want = {d["id"]: d for d in manifest["docs"]}
    if [d["id"] for d in docs] != [d["id"] for d in manifest["docs"]]:
        problems.append("document ids or order differ from the manifest")
    for d in docs:
        m = want.get(d["id"])
        if m is None:
            continue
        real = sha256_bytes(d["text"].encode("utf-8"))
        if not (real == d["sha256"] == m["sha256"]) or not (len(d["text"]) == d["n_chars"] == m["n_chars"]):
            problems.append(f"{d['id']}: sha256 {real} (record {d['sha256']}, manifest {m['sha256']})")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deb", type=Path, help=f"a downloaded {PACKAGE}_{VERSION}_all.deb (default: apt-get download)")
    ap.add_argument("--check", action="store_true", help="only verify the checked-in docs.jsonl against the manifest")
    ap.add_argument("--update-manifest", action="store_true", help="write the manifest from this build")
    ap.add_argument("--out", type=Path, default=DOCS)
    args = ap.parse_args(argv)

    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else None
    if args.check:
        data = args.out.read_bytes()
        docs = [json.loads(line) for line in data.decode("utf-8").splitlines()]
        problems = check_against_manifest(docs, manifest)
        if sha256_bytes(data) != manifest["docs_jsonl_sha256"]:
            problems.append(f"{args.out}: sha256 {sha256_bytes(data)}, manifest {manifest['docs_jsonl_sha256']}")
        print("\n".join(problems) or f"{args.out}: {len(docs)} documents match the manifest")
        return 1 if problems else 0

    if args.deb:
        docs = build(args.deb.read_bytes())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            docs = build(download_deb(Path(tmp)).read_bytes())
    data = jsonl(docs)
    if args.update_manifest or manifest is None:
        manifest = manifest_for(docs)
        manifest["docs_jsonl_sha256"] = sha256_bytes(data)
        MANIFEST.parent.mkdir(parents=True, exist_ok=True)
        MANIFEST.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {MANIFEST}")
    problems = check_against_manifest(docs, manifest)
    if sha256_bytes(data) != manifest["docs_jsonl_sha256"]:
        problems.append(f"built jsonl sha256 {sha256_bytes(data)}, manifest {manifest['docs_jsonl_sha256']}")
    if problems:
        print("\n".join(["the build does not match the manifest:", *problems]), file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}: {len(docs)} documents, {sum(d['n_chars'] for d in docs):,} characters, "
          f"sha256 {sha256_bytes(data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
