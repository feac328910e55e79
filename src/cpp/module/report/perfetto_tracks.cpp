// module/report/perfetto_tracks.cpp: one worker's trace events (slices, counters) as JSON text.
//
// The same rules, and the same bytes, as worker_events' Python path in report/perfetto.py (read
// that first: it is the reference, used where _core is missing). Arithmetic is Python's: floor
// division, integers wide enough that nothing a sidecar can hold overflows (__int128).
#include "module/report/perfetto_tracks.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "lp_core/sampler.h"

namespace lp_module {
namespace {

using i128 = __int128;

// The columns perfetto_tracks takes, in this order (a sidecar's words, lp_core/sampler.h); then
// per GPU its busy % and this pid's SM %.
enum Col : size_t {
  kColEnd,
  kColDt,
  kColTag,
  kColFlags,
  kColReadBytes,
  kColWriteBytes,
  kColRss,
  kColGpu
};

/// Python's a // b, for b > 0 (rounds toward minus infinity).
i128 floor_div(i128 a, i128 b) {
  i128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

void put_int(std::string& out, i128 v) {
  char buf[48];
  char* end = buf + sizeof buf;
  char* p = end;
  unsigned __int128 u =
      v < 0 ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  do {
    *--p = char('0' + int(u % 10));
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  out.append(p, size_t(end - p));
}

/// A value counted in 1/per units (per 10 or 1000) as repr writes the rounded float: the whole
/// part, then the shortest decimals ("5", "5.1", "5.05"), as perfetto.py's _fixed.
void put_fixed(std::string& out, i128 units, int per) {
  i128 whole = floor_div(units, per);
  int frac = int(units - whole * per);
  put_int(out, whole);
  if (frac == 0) return;
  char digits[4];
  int n = per == 10 ? 1 : 3;
  for (int k = n - 1; k >= 0; --k) {
    digits[k] = char('0' + frac % 10);
    frac /= 10;
  }
  while (n > 1 && digits[n - 1] == '0') --n;
  out.push_back('.');
  out.append(digits, size_t(n));
}

/// The buffers of a worker's columns (int64, one per word), held for the call.
struct Columns {
  std::vector<Py_buffer> views;
  Py_ssize_t rows = -1;

  ~Columns() {
    for (Py_buffer& v : views) PyBuffer_Release(&v);
  }

  /// Takes each item of seq as a contiguous buffer of int64; false (a Python error set) if one
  /// is not, or the lengths differ.
  bool take(PyObject* seq) {
    PyObject* fast = PySequence_Fast(seq, "cols must be a sequence of int64 buffers");
    if (fast == nullptr) return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    views.reserve(size_t(n));
    bool ok = true;
    for (Py_ssize_t i = 0; i < n && ok; ++i) {
      Py_buffer view;
      if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fast, i), &view,
                             PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
        ok = false;
        break;
      }
      views.push_back(view);
      const char* f = view.format ? view.format : "B";
      bool int64 = view.itemsize == 8 &&
                   (f[0] == 'q' || f[0] == 'l' ||
                    ((f[0] == '<' || f[0] == '=' || f[0] == '@') && (f[1] == 'q' || f[1] == 'l')));
      if (!int64 || view.ndim > 1) {
        PyErr_SetString(PyExc_TypeError, "cols: each column must be an int64 buffer");
        ok = false;
      } else if (rows >= 0 && view.len / 8 != rows) {
        PyErr_SetString(PyExc_ValueError, "cols: columns of different lengths");
        ok = false;
      }
      rows = view.len / 8;
    }
    Py_DECREF(fast);
    return ok;
  }

  const int64_t* col(size_t i) const { return static_cast<const int64_t*>(views[i].buf); }
};

/// The slice names by tag (JSON text, args included), from the caller's dict; tags it lacks get
/// `unknown`. get() returns nullptr with a Python error set: a name UTF-8 cannot hold sets
/// UnicodeEncodeError (the caller's Python path takes that worker), anything else fails the call.
struct Names {
  PyObject* dict;
  std::string unknown;
  std::unordered_map<int64_t, std::string> cache;

  const std::string* get(int64_t tag) {
    auto it = cache.find(tag);
    if (it != cache.end()) return &it->second;
    PyObject* key = PyLong_FromLongLong(tag);
    if (key == nullptr) return nullptr;
    PyObject* v = PyDict_GetItemWithError(dict, key);  // borrowed
    Py_DECREF(key);
    std::string text = unknown;
    if (v != nullptr && PyUnicode_Check(v)) {
      Py_ssize_t len = 0;
      const char* s = PyUnicode_AsUTF8AndSize(v, &len);
      if (s == nullptr) return nullptr;
      text.assign(s, size_t(len));
    } else if (PyErr_Occurred()) {
      return nullptr;
    }
    return &cache.emplace(tag, std::move(text)).first->second;
  }
};

/// Each row's start in µs since origin (never before the previous row's end) and the last end.
int64_t row_starts(Py_ssize_t n, const int64_t* ends, const int64_t* dts, int64_t origin_ns,
                   std::vector<int64_t>* start_us) {
  std::vector<int64_t> raw_end(static_cast<size_t>(n));
  start_us->resize(size_t(n));
  bool ordered = true;
  for (Py_ssize_t i = 0; i < n; ++i) {
    i128 since = i128(ends[i]) - origin_ns;
    int64_t s = int64_t(floor_div(since - dts[i], 1000));
    int64_t e = int64_t(floor_div(since, 1000));
    (*start_us)[size_t(i)] = s;
    raw_end[size_t(i)] = e;
    if (e < s || (i == 0 ? s < 0 : s < raw_end[size_t(i - 1)])) ordered = false;
  }
  if (ordered) return raw_end[size_t(n - 1)];
  int64_t acc = 0;  // the previous point's end
  for (Py_ssize_t i = 0; i < n; ++i) {
    int64_t s = (*start_us)[size_t(i)];
    int64_t e = raw_end[size_t(i)];
    (*start_us)[size_t(i)] = std::max(s, acc);
    acc = std::max(acc, std::max(e, s));
  }
  return acc;
}

// perfetto_tracks(tid, origin_ns, cols, n_gpu, names, unknown) -> (slices, counters, events) or
// None (a name UTF-8 cannot hold: the Python path writes that worker).
PyObject* perfetto_tracks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "perfetto_tracks takes 6 arguments");
    return nullptr;
  }
  long long tid = PyLong_AsLongLong(args[0]);
  if (tid == -1 && PyErr_Occurred()) return nullptr;
  long long origin_ns = PyLong_AsLongLong(args[1]);
  if (origin_ns == -1 && PyErr_Occurred()) return nullptr;
  long long n_gpu = PyLong_AsLongLong(args[3]);
  if (n_gpu == -1 && PyErr_Occurred()) return nullptr;
  if (!PyDict_Check(args[4]) || !PyUnicode_Check(args[5])) {
    PyErr_SetString(PyExc_TypeError, "perfetto_tracks: names must be a dict, unknown a str");
    return nullptr;
  }
  Columns cols;
  if (!cols.take(args[2])) return nullptr;
  const size_t n_cols = cols.views.size();
  if (n_cols < kColGpu || (n_cols - kColGpu) % 2 != 0 || n_gpu < 0 ||
      static_cast<unsigned long long>(n_gpu) != (n_cols - kColGpu) / 2) {
    PyErr_SetString(PyExc_ValueError, "perfetto_tracks: cols must be 7 columns and 2 a GPU");
    return nullptr;
  }
  Names names{args[4], {}, {}};
  Py_ssize_t len = 0;
  const char* unknown = PyUnicode_AsUTF8AndSize(args[5], &len);
  if (unknown == nullptr) return nullptr;
  names.unknown.assign(unknown, size_t(len));

  const Py_ssize_t n = std::max<Py_ssize_t>(cols.rows, 0);
  const int64_t* ends = cols.col(kColEnd);
  const int64_t* dts = cols.col(kColDt);
  const int64_t* tags = cols.col(kColTag);
  const int64_t* flags = cols.col(kColFlags);
  const int64_t* rbs = cols.col(kColReadBytes);
  const int64_t* wbs = cols.col(kColWriteBytes);
  const int64_t* rsss = cols.col(kColRss);
  std::vector<int64_t> start_us;
  const int64_t end_us = n > 0 ? row_starts(n, ends, dts, origin_ns, &start_us) : 0;

  std::string pid;
  put_int(pid, tid);
  long long n_events = 0;
  // Slices: each change of the row's tag ends the open slice and begins the next where that row
  // began.
  std::string slices;
  const std::string b_head = "{\"ph\":\"B\",\"pid\":" + pid + ",\"tid\":1,\"name\":";
  const std::string e_head = "{\"ph\":\"E\",\"pid\":" + pid + ",\"tid\":1,\"ts\":";
  auto end_slice = [&](int64_t ts) {
    if (!slices.empty()) slices += ",\n";
    slices += e_head;
    put_int(slices, ts);
    slices += '}';
    ++n_events;
  };
  int64_t open_tag = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    int64_t tag = tags[i];
    if (tag == open_tag) continue;
    if (open_tag != 0) end_slice(start_us[size_t(i)]);
    if (tag != 0) {
      const std::string* name = names.get(tag);
      if (name == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return nullptr;
        PyErr_Clear();
        Py_RETURN_NONE;
      }
      if (!slices.empty()) slices += ",\n";
      slices += b_head;
      slices += *name;
      slices += ",\"ts\":";
      put_int(slices, start_us[size_t(i)]);
      slices += '}';
      ++n_events;
    }
    open_tag = tag;
  }
  if (open_tag != 0) end_slice(end_us);

  // Counters: a point where the track's flag is set and its value (integer units, rounded half
  // up) changed since the track's last point. RSS in 0.1 MB; I/O in 0.001 MB/s over the row's dt.
  std::string counters;
  const std::string c_head = "{\"ph\":\"C\",\"pid\":" + pid + ",\"name\":";
  // A point's text up to its first value: `head` (c_head, the track's name, ',"ts":'), the row's
  // start, then ',"args":{"key":'.
  auto open_point = [&](const std::string& head, Py_ssize_t i, const char* key) {
    counters += head;
    put_int(counters, start_us[size_t(i)]);
    counters += ",\"args\":{\"";
    counters += key;
    counters += "\":";
    ++n_events;
  };
  const std::string rss_head = c_head + "\"RSS (MB)\",\"ts\":";
  bool have = false;
  i128 last_rss = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!(flags[i] & lp::kSfRss) || rsss[i] < 0) continue;
    i128 units = floor_div(i128(rsss[i]) + 50'000, 100'000);
    if (have && units == last_rss) continue;
    have = true;
    last_rss = units;
    open_point(rss_head, i, "rss");
    put_fixed(counters, units, 10);
    counters += "}},\n";
  }
  const std::string io_head = c_head + "\"I/O (MB/s)\",\"ts\":";
  have = false;
  i128 last_rd = 0, last_wr = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!(flags[i] & lp::kSfIo) || dts[i] < 1) continue;
    i128 two_dt = 2 * i128(dts[i]);
    i128 rd = floor_div(i128(std::max<int64_t>(rbs[i], 0)) * 2'000'000 + dts[i], two_dt);
    i128 wr = floor_div(i128(std::max<int64_t>(wbs[i], 0)) * 2'000'000 + dts[i], two_dt);
    if (have && rd == last_rd && wr == last_wr) continue;
    have = true;
    last_rd = rd;
    last_wr = wr;
    open_point(io_head, i, "read");
    put_fixed(counters, rd, 1000);
    counters += ",\"write\":";
    put_fixed(counters, wr, 1000);
    counters += "}},\n";
  }
  for (long long k = 0; k < n_gpu; ++k) {
    const int64_t* busy = cols.col(kColGpu + 2 * size_t(k));
    const int64_t* mine_col = cols.col(kColGpu + 2 * size_t(k) + 1);
    std::string head = c_head + "\"GPU ";
    put_int(head, k);
    head += " (%)\",\"ts\":";
    have = false;
    int64_t last_busy = 0, last_mine = 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!(flags[i] & lp::kSfGpu) || busy[i] < 0) continue;
      int64_t mine = std::max<int64_t>(mine_col[i], 0);
      if (have && busy[i] == last_busy && mine == last_mine) continue;
      have = true;
      last_busy = busy[i];
      last_mine = mine;
      open_point(head, i, "busy");
      put_int(counters, busy[i]);
      counters += ",\"this run\":";
      put_int(counters, mine);
      counters += "}},\n";
    }
  }
  if (!counters.empty()) counters.resize(counters.size() - 2);  // its last ",\n"

  PyObject* s = PyUnicode_DecodeUTF8(slices.data(), Py_ssize_t(slices.size()), "strict");
  PyObject* c =
      s ? PyUnicode_DecodeUTF8(counters.data(), Py_ssize_t(counters.size()), "strict") : nullptr;
  PyObject* n_obj = c ? PyLong_FromLongLong(n_events) : nullptr;
  PyObject* out = n_obj ? PyTuple_New(3) : nullptr;
  if (out == nullptr) {
    Py_XDECREF(s);
    Py_XDECREF(c);
    Py_XDECREF(n_obj);
    return nullptr;
  }
  PyTuple_SET_ITEM(out, 0, s);
  PyTuple_SET_ITEM(out, 1, c);
  PyTuple_SET_ITEM(out, 2, n_obj);
  return out;
}

PyMethodDef functions[] = {
    {"perfetto_tracks",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(perfetto_tracks)), METH_FASTCALL,
     "perfetto_tracks(tid, origin_ns, cols, n_gpu, names, unknown) -> (slices, counters, "
     "events) | None: one worker's phase slices and counter events as the trace's JSON text (each "
     "event joined by ',\\n'), as report/perfetto.py's Python path writes them; cols: int64 "
     "columns (end ns, dt ns, tag, flags, read bytes, write bytes, RSS bytes, then per GPU busy "
     "% and this pid's SM %); names: {tag: the slice's JSON name text}; None where a name is "
     "not UTF-8 (the caller writes that worker)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int add_perfetto_tracks(PyObject* module) {
  return PyModule_AddFunctions(module, functions);
}

}  // namespace lp_module
