"""The per-phase record's one field table (lp_core/phase_fields.h, copied into core_constants by
scripts/gen-core-constants), and what the reading side derives from it.

Every consumer of a phase record takes its field list from here: the typed record the reader
decodes (``worker_doc.PhaseRec``, built by ``record_struct``), ``PhaseStats.add`` and ``since``
(the live deltas), the fold's per-record code (``report/fold.py``, generated from ``fold_lines``),
the host summary's ``PhaseSum`` and the field table of docs/worker-file.md (``doc_table``, checked
by tests/unit/test_phase_fields_table.py). A scalar field (count, ns, ns?, rate, bool) is handled
by every one of them from its row alone; the container fields (path, hist, counters, io, the
saturated names) have their own code in each, and each consumer names the ones it handles
(``CONTAINERS``), so a new container type fails the tests until it is handled everywhere.

How a field combines (its ``combine``): ``sum`` adds across threads and processes and an interval
has the difference (a ``ns?`` sum is None once any part is); ``state`` adds across threads and
processes and an interval has the latest value (entries open now); ``min``/``max`` of a ``ns?``
field are the exact extremes of the entries (an aggregate without entries adds nothing, one with
entries but no extremes makes them unknown; an interval has them only while nothing came before);
``max`` of a ``rate``, ``or`` and ``union`` keep the largest, any, all (an interval: the latest).
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import msgspec

from lineprofiler.runfile import core_constants as _cc

MAX_NS = 2**63 - 1  # ~292 years: any count or time above is corrupt

Ns = Annotated[int, msgspec.Meta(ge=0, le=MAX_NS)]
Int64 = Annotated[int, msgspec.Meta(ge=-MAX_NS - 1, le=MAX_NS)]
Bucket = Annotated[int, msgspec.Meta(ge=0, le=_cc.HIST_BUCKETS - 1)]
Rate = Annotated[int, msgspec.Meta(ge=1, le=MAX_NS)]


class PhaseField(NamedTuple):
    name: str  # PhaseStats' attribute
    type: str
    combine: str
    unit: str
    json: str  # the worker file's key
    doc: str


FIELDS: tuple[PhaseField, ...] = tuple(PhaseField(*f) for f in _cc.PHASE_FIELDS)
BY_NAME: dict[str, PhaseField] = {f.name: f for f in FIELDS}

# (annotation, default) of each type in a worker file; "key" fields have no default.
_TYPES: dict[str, tuple[Any, Any]] = {
    "names": (list[str], []),
    "count": (Ns, 0),
    "ns": (Ns, 0),
    "ns?": (Ns | None, None),
    "rate": (Rate, 1),
    "buckets": (list[tuple[Bucket, Ns]], []),
    "int_map": (dict[str, Int64], {}),  # any int64: a saturated counter is a value
    "byte_map?": (dict[str, Any] | None, None),  # integer byte sums; other fields are ignored
    "bool": (bool, False),
}
SCALAR_TYPES = frozenset({"count", "ns", "ns?", "rate", "bool"})
# The container fields, which every consumer handles by name.
CONTAINERS: frozenset[str] = frozenset(f.name for f in FIELDS if f.type not in SCALAR_TYPES)


def _names(combine: str, types: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS if f.combine == combine and f.type in types)


# Integer fields that add across threads and processes, and difference into an interval's.
SUMMED: tuple[str, ...] = _names("sum", ("count", "ns"))
# Sums that may be missing (None: not measured, in any part).
NULLABLE_SUMS: tuple[str, ...] = _names("sum", ("ns?",))
# Add across threads and processes; an interval has the latest value.
STATES: tuple[str, ...] = _names("state", ("count", "ns"))
# The largest of the parts (the sampling rate).
MAXIMA: tuple[str, ...] = _names("max", ("rate",))
# Any of the parts (marks).
ANY: tuple[str, ...] = _names("or", ("bool",))
# The exact extremes of the entries: (the min field, the max field), merged by
# stats.merged_extremes (they need the parts' entry counts).
EXTREMES: tuple[str, ...] = _names("min", ("ns?",)) + _names("max", ("ns?",))
# Every scalar field has one of the rules above.
_RULED = set(SUMMED + NULLABLE_SUMS + STATES + MAXIMA + ANY + EXTREMES)
UNRULED: tuple[str, ...] = tuple(
    f.name for f in FIELDS if f.type in SCALAR_TYPES and f.name not in _RULED
)


def annotation(type_: str) -> tuple[Any, Any]:
    """(annotation, default) of a field type, as a worker file holds it."""
    return _TYPES[type_]


def record_struct(name: str, **struct_kw: Any) -> type[msgspec.Struct]:
    """A msgspec Struct type of the worker file's phase record: one attribute per field, named as
    ``PhaseStats`` names it, decoded from its worker-file key, typed and defaulted by its type."""
    fields: list[Any] = []
    for f in FIELDS:
        hint, default = _TYPES[f.type]
        kw: dict[str, Any] = {} if f.json == f.name else {"name": f.json}
        if f.combine == "key":
            fields.append((f.name, hint, msgspec.field(**kw)) if kw else (f.name, hint))
        else:
            fields.append((f.name, hint, msgspec.field(default=default, **kw)))
    return msgspec.defstruct(name, fields, **struct_kw)


def fold_lines(m: str, rec: str, indent: str) -> list[str]:
    """Python statements that add record ``rec``'s scalar fields into aggregate ``m`` (the fold's
    per-record code, generated so that it has no per-field loop or getattr: the merge's speed).
    The extremes come first: they need both sides' entry counts before ``calls`` is added."""
    out = []
    if EXTREMES:
        lo, hi = EXTREMES
        out += [
            f"if {rec}.calls:",
            f"    {m}.{lo}, {m}.{hi} = merged_extremes({m}.calls, {m}.{lo}, {m}.{hi}, "
            f"{rec}.calls, {rec}.{lo}, {rec}.{hi})",
        ]
    for f in SUMMED + STATES:
        out.append(f"{m}.{f} += {rec}.{f}")
    for f in NULLABLE_SUMS:
        out += [
            f"if {rec}.{f} is None:",
            f"    {m}.{f} = None",
            f"elif {m}.{f} is not None:",
            f"    {m}.{f} += {rec}.{f}",
        ]
    for f in ANY:
        out += [f"if {rec}.{f}:", f"    {m}.{f} = True"]
    # MAXIMA (the sampling rate) are the caller's: the fold keeps every rate seen, too.
    return [indent + line for line in out]


def doc_table(fields: Any = None) -> str:
    """The Markdown table of the fields (``fields``: the table's rows, FIELDS by default), as
    docs/worker-file.md holds it (scripts/gen-core-constants writes it there from _core's)."""
    rows = ["| key | type | combines | unit | meaning |", "|---|---|---|---|---|"]
    for f in map(PhaseField._make, FIELDS if fields is None else fields):
        doc = f.doc.replace("|", "\\|")
        rows.append(f"| `{f.json}` | {f.type} | {f.combine} | {f.unit or '-'} | {doc} |")
    return "\n".join(rows) + "\n"
