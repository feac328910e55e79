// module/accounting/phase_names.cpp: the name cache's slow path and phase-name hygiene (checked
// once a name).
#include <cstdio>
#include <string>

#include "lp_core/names.h"
#include "module/accounting/recorder_object.h"

namespace lp_module {

NameCacheEntry g_name_cache[kNameCacheSize];

namespace {
PyObject* g_phase_name_warning = nullptr;  // lineprofiler._core.PhaseNameWarning
PyObject* g_phase_name_error = nullptr;    // lineprofiler._core.PhaseNameError
PyObject* name_shape_py(PyObject*, PyObject* arg) {
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(arg, &len);
  if (!utf8) return nullptr;
  std::string shape = lp::name_shape(std::string_view(utf8, size_t(len)));
  return PyUnicode_DecodeUTF8(shape.data(), Py_ssize_t(shape.size()), "replace");
}

PyMethodDef name_functions[] = {
    {"name_shape", name_shape_py, METH_O,
     "name_shape(name) -> the name with its data-like parts (digit runs, hex ids) folded to '#'."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

LP_COLD bool name_id_slow(PyObject* name, NameCacheEntry& entry, uint32_t* id) {
  PyObject* text = PyUnicode_Check(name) ? (Py_INCREF(name), name) : PyObject_Str(name);
  if (!text) return false;
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(text, &len);
  if (utf8) {
    *id = lp::NameTable::instance().intern(std::string_view(utf8, size_t(len)));
  } else {  // lone surrogates: keep the name, escaped, rather than fail the phase
    PyErr_Clear();
    PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "backslashreplace");
    if (!bytes) {
      Py_DECREF(text);
      return false;
    }
    *id = lp::NameTable::instance().intern(
        std::string_view(PyBytes_AS_STRING(bytes), size_t(PyBytes_GET_SIZE(bytes))));
    Py_DECREF(bytes);
  }
  Py_DECREF(text);
  if (PyUnicode_CheckExact(name)) {
    Py_INCREF(name);
    Py_XSETREF(entry.obj, name);
    entry.id = *id;
    entry.shape_checked_by = 0;
  }
  return true;
}

PyObject* name_str(uint32_t id) {
  std::string s = lp::NameTable::instance().name(id);
  return PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "replace");
}

LP_COLD bool check_name_shape(RecorderObject* r, uint32_t id) {
  std::string text = lp::NameTable::instance().name(id);
  lp::ShapeVerdict v = r->shapes->note(id, text);
  if (r->strict_names && v.ordinal >= 2) {
    PyErr_Format(g_phase_name_error,
                 "phase name '%s' shares the shape '%s' with an earlier phase name "
                 "(strict_names=True): use a fixed name and count() for the varying part",
                 text.c_str(), v.shape.c_str());
    return false;
  }
  if (v.warn_now) {
    char msg[1024];
    snprintf(msg, sizeof msg,
             "%u distinct phase names share the shape '%s' (most recently '%s').\n"
             "Names built from data grow the phase tree until it folds at %u paths and the report\n"
             "stops being readable \u2014 use a fixed name and count() for the varying part.",
             unsigned(v.shape_count), v.shape.c_str(), text.c_str(), unsigned(lp::kMaxNodes));
    if (PyErr_WarnEx(g_phase_name_warning, msg, 1) < 0) return false;
  }
  return true;
}

int init_phase_names(PyObject* module) {
  g_phase_name_warning = PyErr_NewExceptionWithDoc(
      "lineprofiler._core.PhaseNameWarning",
      "Many distinct phase names share one shape: names are being built from data.",
      PyExc_UserWarning, nullptr);
  g_phase_name_error = PyErr_NewExceptionWithDoc(
      "lineprofiler._core.PhaseNameError",
      "strict_names=True: a second phase name shares the shape of an earlier one.",
      PyExc_ValueError, nullptr);
  if (!g_phase_name_warning || !g_phase_name_error ||
      PyModule_AddObjectRef(module, "PhaseNameWarning", g_phase_name_warning) < 0 ||
      PyModule_AddObjectRef(module, "PhaseNameError", g_phase_name_error) < 0) {
    return -1;
  }
  return PyModule_AddFunctions(module, name_functions);
}

}  // namespace lp_module
