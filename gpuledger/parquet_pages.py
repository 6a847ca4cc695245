"""Every page of a Parquet file checked against its CRC32 without decoding it: the fast path of lake_check.

pyarrow verifies page checksums only while it decodes the pages, and decoding a new hour of 10,000 GPUs' samples
(8 files, 27.6 MB) took 0.59-0.75 s of an hourly run that must stay under 5 s; the CRCs alone take a few
milliseconds (benchmarks/parquet_checksums.py). So the footer and each column chunk's pages are read here (Thrift's
compact protocol, as far as they need it): each page's header, then the CRC32 of the page's bytes as
written, which is what Parquet's `crc` field covers (the header excluded). What a CRC cannot see, a damaged header,
is caught by the walk against the footer: each field of the type Thrift's reader requires, the pages tiling the
chunk exactly, their value counts adding up to the chunk's, headers and sizes to its uncompressed size, and their
encodings to the footer's counts of them; a dictionary page's count against its values. The footer itself is
parsed by pyarrow first (lake_check), and its chunks' types and level histograms are checked against the schema.

A page written without a checksum (a file from before the lake wrote them, or another writer's) cannot be checked
this way: `Unverifiable`, and the caller decodes the file with pyarrow instead. tests/core/test_parquet_pages.py
checks that every damage pyarrow's decoding finds, this walk finds too.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Mapping, Sequence

# PageHeader (parquet.thrift): the fields read here; the rest are skipped.
_TYPE, _USIZE, _CSIZE, _CRC = 1, 2, 3, 4
_DATA_V1, _INDEX, _DICT, _DATA_V2 = 0, 1, 2, 3
_HEADER_OF = {_DATA_V1: 5, _DICT: 7, _DATA_V2: 8}  # the field holding each page type's own header
_NUM_VALUES = 1  # field 1 of DataPageHeader, DictionaryPageHeader and DataPageHeaderV2
_MASK = 0xFFFFFFFF
# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData (parquet.thrift): the fields that locate and size the pages.
_ROW_GROUPS, _COLUMNS, _META_DATA = 4, 1, 3
_VALUES, _UNCOMPRESSED, _COMPRESSED, _DATA_OFFSET, _DICT_OFFSET = 5, 6, 7, 9, 11
_CHUNK_NEEDS = (_VALUES, _UNCOMPRESSED, _COMPRESSED, _DATA_OFFSET)
_PHYSICAL, _ENCODINGS, _CODEC, _ENCODING_STATS, _SIZE_STATS = 1, 2, 4, 13, 16
_V2_ENCODING = 4  # DataPageHeaderV2's encoding
_ENCODING, _DEF_ENCODING, _REP_ENCODING = 2, 3, 4  # DataPageHeader's (DictionaryPageHeader's encoding is field 2 too)
_PLAIN, _PLAIN_DICTIONARY, _RLE = 0, 2, 3
_WIDTH = {1: 4, 2: 8, 3: 12, 4: 4, 5: 8}  # INT32, INT64, INT96, FLOAT, DOUBLE: bytes per PLAIN value
_BYTE_ARRAY = 6
_CODECS = {0: None, 6: "zstd"}  # the codecs a dictionary page is unpacked with here (the lake writes zstd)


class Unverifiable(Exception):
    """A page without a checksum."""


class _Compact:
    """The Thrift compact protocol, as far as a page header needs: structs of integers, skipping everything else."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("page header runs past its column chunk")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("malformed varint in a page header")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def skip(self, kind: int, in_container: bool = False) -> None:
        if kind in (1, 2):  # booleans: in the field header, but a byte each inside a list or map
            self.pos += 1 if in_container else 0
        elif kind == 3:
            self.pos += 1
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            n = self.varint()  # read first: `self.pos += self.varint()` would add to the position before it
            self.pos += n
        elif kind in (9, 10):
            head = self.byte()
            n = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(n):
                self.skip(head & 0x0F, True)
        elif kind == 11:
            n = self.varint()
            if n:
                kv = self.byte()
                for _ in range(n):
                    self.skip(kv >> 4, True)
                    self.skip(kv & 0x0F, True)
        elif kind == 12:
            self.struct({})
        else:
            raise ValueError(f"unknown Thrift type {kind} in a page header")
        if self.pos > self.end:
            raise ValueError("page header runs past its column chunk")

    def struct(self, spec: Mapping[int, tuple]) -> dict[int, object]:
        """A struct's fields named in `spec` ({field id: (type,) or (STRUCT, spec) or (LIST, element type[,
        spec])}), by field id. As Thrift's own reader does, a field of another type than its spec's, or not in it,
        is skipped; a value the type cannot hold is an error."""
        out: dict[int, object] = {}
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            kind, delta = head & 0x0F, head >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            want = spec.get(fid)
            if want is None or want[0] != (BOOL if kind == 2 else kind):
                self.skip(kind)
            elif kind in (I32, I64):
                out[fid] = self.integer(kind)
            elif kind in (BOOL, 2):
                out[fid] = kind == BOOL
            elif kind == STRUCT:
                out[fid] = self.struct(want[1])
            else:  # a list
                head = self.byte()
                n = head >> 4 if head >> 4 != 15 else self.varint()
                if head & 0x0F != want[1]:
                    raise ValueError(f"field {fid} holds a list of another type")
                out[fid] = [self.struct(want[2]) if want[1] == STRUCT else self.integer(want[1]) for _ in range(n)]

    def integer(self, kind: int) -> int:
        v = self.zigzag()
        if not -(1 << (31 if kind == I32 else 63)) <= v < 1 << (31 if kind == I32 else 63):
            raise ValueError("an integer out of its type's range")
        return v


# Thrift's compact types, and the specs (parquet.thrift) of what is read here: PageHeader and the page kinds' own
# headers; FileMetaData down to each ColumnMetaData's location, sizes, encodings and level histograms.
BOOL, I32, I64, LIST, STRUCT = 1, 5, 6, 9, 12
_DATA_V1_SPEC = {1: (I32,), 2: (I32,), 3: (I32,), 4: (I32,)}
_DICT_SPEC = {1: (I32,), 2: (I32,), 3: (BOOL,)}
_DATA_V2_SPEC = {1: (I32,), 2: (I32,), 3: (I32,), 4: (I32,), 5: (I32,), 6: (I32,), 7: (BOOL,)}
_PAGE_SPEC = {
    1: (I32,),
    2: (I32,),
    3: (I32,),
    4: (I32,),
    5: (STRUCT, _DATA_V1_SPEC),
    7: (STRUCT, _DICT_SPEC),
    8: (STRUCT, _DATA_V2_SPEC),
}
_SIZE_STATS_SPEC = {2: (LIST, I64), 3: (LIST, I64)}
_CHUNK_SPEC = {1: (I32,), 2: (LIST, I32), 4: (I32,), 5: (I64,), 6: (I64,), 7: (I64,), 9: (I64,), 11: (I64,)}
_CHUNK_SPEC[_ENCODING_STATS] = (LIST, STRUCT, {1: (I32,), 2: (I32,), 3: (I32,)})  # pages per type and encoding
_CHUNK_SPEC[_SIZE_STATS] = (STRUCT, _SIZE_STATS_SPEC)
_PHYSICAL_TYPES = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")
_FILE_SPEC = {4: (LIST, STRUCT, {1: (LIST, STRUCT, {3: (STRUCT, _CHUNK_SPEC)})})}


def check(data: bytes, columns: Sequence[tuple[str, int, int]]) -> str | None:
    """What is wrong with the pages of the Parquet file `data`, or None. `columns`: each leaf column's physical
    type and greatest definition and repetition levels, from the file's schema (a chunk's type must be its column's,
    and its level histograms are sized by them). Raises Unverifiable where a page can only be checked by decoding it
    (and nothing else is wrong)."""
    buf = memoryview(data)
    try:
        chunks = _chunks(buf)
    except (ValueError, IndexError) as e:
        return f"footer cannot be read ({e})"
    unchecked = None
    for g, c, chunk in chunks:
        if c >= len(columns):
            return f"row group {g} has more columns than its schema"
        try:
            why = _check_chunk(buf, chunk, columns[c])
        except Unverifiable as e:
            unchecked = unchecked or e
            continue
        if why is not None:
            return f"row group {g}, column {c}: {why}"
    if unchecked is not None:
        raise unchecked
    return None


def _chunks(buf: memoryview) -> list[tuple[int, int, dict]]:
    """(row group, column, ColumnMetaData fields) of every column chunk, from the footer, read here: pyarrow's
    metadata accessors abort the process on some damaged footers (a level histogram of the wrong size raises a C++
    exception no Python code can catch), where reading the file through pyarrow raises."""
    if len(buf) < 12 or bytes(buf[:4]) != b"PAR1" or bytes(buf[-4:]) != b"PAR1":
        raise ValueError("not a Parquet file")
    size = int.from_bytes(buf[-8:-4], "little")
    if size > len(buf) - 12:
        raise ValueError("footer longer than the file")
    meta = _Compact(buf, len(buf) - 8 - size, len(buf) - 8).struct(_FILE_SPEC)
    groups = meta.get(_ROW_GROUPS)
    if not isinstance(groups, list):
        raise ValueError("no row groups")
    out = []
    for g, group in enumerate(groups):
        columns = group.get(_COLUMNS)
        if not isinstance(columns, list):
            raise ValueError(f"row group {g} has no columns")
        for c, column in enumerate(columns):
            chunk = column.get(_META_DATA)
            if not isinstance(chunk, dict) or any(not isinstance(chunk.get(f), int) for f in _CHUNK_NEEDS):
                raise ValueError(f"row group {g}, column {c} has no metadata")
            out.append((g, c, chunk))
    return out


def _check_chunk(buf: memoryview, chunk: dict, column: tuple[str, int, int]) -> str | None:
    physical, max_def, max_rep = column
    if not 0 <= chunk.get(_PHYSICAL, -1) < len(_PHYSICAL_TYPES) or _PHYSICAL_TYPES[chunk[_PHYSICAL]] != physical:
        return f"its type is not its column's {physical}"
    if chunk.get(_CODEC) not in _CODECS:  # another codec: its pages are unpacked by a decoder, the data checked there
        raise Unverifiable(f"a column chunk in codec {chunk.get(_CODEC)} is checked by decoding")
    sizes = chunk.get(_SIZE_STATS, {})
    for name, field, top in (("definition", 3, max_def), ("repetition", 2, max_rep)):
        if sizes.get(field) and len(sizes[field]) != top + 1:
            return f"its {name} level histogram has {len(sizes[field])} bins, not {top + 1}"
    start = chunk[_DATA_OFFSET]
    if 0 < chunk.get(_DICT_OFFSET, 0) < start:
        start = chunk[_DICT_OFFSET]
    end = start + chunk[_COMPRESSED]
    if start < 4 or end > len(buf):
        return "column chunk lies outside the file"
    pos, values, unpacked, first, unchecked = start, 0, 0, True, None
    encodings = set(chunk.get(_ENCODINGS) or ())
    seen: Counter = Counter()  # pages by (type, encoding), against the footer's encoding_stats
    while pos < end:
        r = _Compact(buf, pos, end)
        try:
            header = r.struct(_PAGE_SPEC)
        except (ValueError, IndexError) as e:
            return f"page header at byte {pos} cannot be read ({e})"
        kind, csize, usize = header.get(_TYPE), header.get(_CSIZE), header.get(_USIZE)
        if kind not in (_DATA_V1, _INDEX, _DICT, _DATA_V2) or not isinstance(csize, int) or not isinstance(usize, int):
            return f"page header at byte {pos} is not one"
        if csize < 0 or usize < 0 or r.pos + csize > end:
            return f"page at byte {pos} runs past its column chunk"
        if kind == _DICT and not first:
            return f"dictionary page at byte {pos} after a data page"
        own = header.get(_HEADER_OF.get(kind, -1))
        if kind in (_DATA_V1, _DATA_V2, _DICT):
            if not isinstance(own, dict) or not isinstance(own.get(_NUM_VALUES), int):
                return f"page at byte {pos} has no value count"
            if kind != _DATA_V2 and own.get(_ENCODING) not in encodings:  # (V2 pages are decoded: see below)
                return f"page at byte {pos} names an encoding its column chunk does not list"
            if own[_NUM_VALUES] < 0:
                return f"page at byte {pos} has a negative value count"
            values += own[_NUM_VALUES] if kind != _DICT else 0
            seen[(kind, own.get(_ENCODING if kind != _DATA_V2 else _V2_ENCODING))] += 1
        crc = header.get(_CRC)
        page = buf[r.pos : r.pos + csize]
        if not isinstance(crc, int):  # the rest of the walk still runs: a header damaged here is damaged elsewhere
            unchecked = unchecked or f"page at byte {pos} has no checksum"
        elif zlib.crc32(page) != crc & _MASK:
            return f"page at byte {pos} fails its checksum"
        # What a checksum does not cover and this walk cannot check from the footer is left to a decoder: another
        # page version, levels in another encoding, a dictionary in a codec not unpacked here.
        if kind != _DATA_V1 and kind != _DICT:
            unchecked = unchecked or f"page at byte {pos} is of a kind checked by decoding"
        elif kind == _DATA_V1 and (own.get(_DEF_ENCODING) != _RLE or own.get(_REP_ENCODING) != _RLE):
            unchecked = unchecked or f"page at byte {pos} has levels in another encoding"
        elif kind == _DICT:
            why = _check_dictionary(chunk, own, page, usize)
            if why == "unchecked":
                unchecked = unchecked or f"dictionary page at byte {pos} is checked by decoding"
            elif why is not None:
                return f"dictionary page at byte {pos}: {why}"
        unpacked += (r.pos - pos) + usize
        pos, first = r.pos + csize, False
    if values != chunk[_VALUES]:
        return f"its pages hold {values:,} values, its footer says {chunk[_VALUES]:,}"
    if unpacked != chunk[_UNCOMPRESSED]:
        return f"its pages unpack to {unpacked:,} bytes, its footer says {chunk[_UNCOMPRESSED]:,}"
    v2 = any(kind == _DATA_V2 for kind, _ in seen)  # (decoded: writers count their pages' types differently)
    counted = Counter({(e.get(1), e.get(2)): e[3] for e in chunk.get(_ENCODING_STATS, ()) if e.get(3)})
    if _ENCODING_STATS in chunk and not v2 and seen != counted:
        return "its pages' encodings are not those its footer counts"
    if unchecked:
        raise Unverifiable(unchecked)
    return None


def _check_dictionary(chunk: dict, own: dict, page: memoryview, usize: int) -> str | None:
    """A dictionary page's value count against its bytes (its header's count is covered by no checksum): PLAIN
    values of a fixed width fill it exactly; byte strings (each a 4-byte length and its bytes) are counted in it,
    unpacked. "unchecked" where it cannot be (another codec or type)."""
    if own.get(_ENCODING) not in (_PLAIN, _PLAIN_DICTIONARY):
        return "not PLAIN-encoded"
    n, physical = own[_NUM_VALUES], chunk.get(_PHYSICAL)
    if physical in _WIDTH:
        return None if n * _WIDTH[physical] == usize else f"{n:,} values do not fill its {usize:,} bytes"
    if physical != _BYTE_ARRAY or chunk.get(_CODEC) not in _CODECS:
        return "unchecked"
    codec = _CODECS[chunk[_CODEC]]
    if codec is None:
        raw = bytes(page)
    else:
        import pyarrow as pa  # only here: the walk itself needs no library

        try:
            raw = pa.Codec(codec).decompress(page, decompressed_size=usize).to_pybytes()
        except (pa.ArrowException, ValueError) as e:
            return f"cannot be unpacked ({e})"
    if len(raw) != usize:
        return f"unpacks to {len(raw):,} bytes, its header says {usize:,}"
    at = 0
    for _ in range(n):
        if at + 4 > usize:
            return f"holds fewer than its {n:,} values"
        at += 4 + int.from_bytes(raw[at : at + 4], "little")
    return None if at == usize else f"holds other than its {n:,} values"
