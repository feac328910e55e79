// lp_core/phase_fields.h: the one field table of the per-phase record (issue 30).
//
// A worker file's threads[].phases[] record, field by field: its name on the reading side, its
// type, how it combines (across a thread's entries, threads, processes and intervals), its unit,
// its key in the worker file and a doc line. worker_file.cpp writes these keys; _core exports the
// table as PHASE_FIELDS and scripts/gen-core-constants copies it into runfile/core_constants.py,
// from which the reading side derives its typed record (runfile/worker_doc.py), the fold
// (report/fold.py), PhaseStats.add/since (live deltas), the host summary (runfile/summary.py) and
// the field table of docs/worker-file.md. Adding a field is: a row here, the code that measures
// and writes it, a test.
//
// Types: "names" (list of strings), "count" and "ns" (integers in [0, 2^63)), "ns?" (such an
// integer or null: not known), "rate" (an integer >= 1), "buckets" ([[bucket, count], ...]),
// "int_map" (name -> int64), "byte_map?" (name -> byte count, or absent), "bool".
// Combines: "key" (identifies the record), "sum" (adds; an interval has the difference; a "ns?"
// sum is null once any part is), "state" (adds across threads and processes; an interval has the
// latest value), "min"/"max" (the extreme over the parts that have entries; null once such a part
// has none), "union", "or".
#pragma once

#include <array>

namespace lp {

struct PhaseField {
  const char* name;     // the reading side's attribute (PhaseStats)
  const char* type;     // see above
  const char* combine;  // see above
  const char* unit;     // "" where the value has none
  const char* json;     // the key in the worker file
  const char* doc;      // one line, for docs/worker-file.md
};

inline constexpr std::array<PhaseField, 18> kPhaseFields{{
    {"path", "names", "key", "", "path", "the phase's names from the thread's root"},
    {"calls", "count", "sum", "entries", "calls", "completed entries"},
    {"wall_ns", "ns", "sum", "ns", "wall_ns", "wall time of the completed entries"},
    {"self_ns", "ns", "sum", "ns", "self_ns",
     "wall + open time less the children's wall + open time"},
    {"cpu_ns", "ns?", "sum", "ns", "cpu_ns",
     "thread CPU time of the completed entries; null: CPU time not measured"},
    {"open", "count", "state", "entries", "open", "entries still open at the write"},
    {"open_ns", "ns", "state", "ns", "open_ns", "time so far of the entries still open"},
    {"hist", "buckets", "sum", "entries", "hist",
     "[bucket, count] pairs of the completed entries' wall times (nonzero buckets)"},
    {"counters", "int_map", "sum", "", "counters", "count() totals recorded inside the phase"},
    {"sample_every", "rate", "max", "", "sample_every",
     "1 entry in N measured, the values above already scaled (estimates); absent: 1"},
    {"async_calls", "count", "sum", "entries", "async_calls",
     "asyncio task entries that spanned an await (their CPU is in no cpu_ns)"},
    {"async_wall_ns", "ns", "sum", "ns", "async_wall_ns", "their wall time (part of wall_ns)"},
    {"io", "byte_map?", "sum", "bytes", "io", "phase(io=True) byte sums; absent: no such entry"},
    {"saturated", "names", "union", "", "counters_saturated",
     "counters whose sum reached the int64 range: their values are bounds"},
    {"synthetic", "bool", "or", "", "synthetic",
     "the recorder's own \"(folded)\" node (a full tree), not a phase of that name"},
    {"min_wall_ns", "ns?", "min", "ns", "min_wall_ns",
     "exact shortest measured entry; absent: not known"},
    {"max_wall_ns", "ns?", "max", "ns", "max_wall_ns",
     "exact longest measured entry; absent: not known"},
    {"raised", "count", "sum", "entries", "raised",
     "entries that exited by an exception (a with block an exception left, a C++ scope "
     "unwound); absent: none"},
}};

}  // namespace lp
