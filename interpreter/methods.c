/* _sandwit_methods: the `sandwit:interpreter/methods` import, lowered by hand.
 *
 * The method functions cross to the host through `call(method, marshalled)`
 * (crossing.invoke). componentize-py's own binding of an import is generic:
 * a Python function around its runtime's `call_import`, which lowers the
 * arguments and lifts the result one value at a time through Python objects.
 * The import's shape is fixed (a string and bytes in, bytes out), so this
 * module passes the two buffers where CPython keeps them and copies the
 * answer into one `bytes`: the same call, without the generic machinery.
 *
 * Built by interpreter/build (clang, wasm32-wasi, position-independent) as
 * a shared library that componentize-py links into the component like any
 * native extension. No CPython headers for wasm32-wasi exist outside
 * componentize-py's own build, so the few declarations it needs are written
 * below; they are all of CPython's stable ABI (PEP 384), whose signatures and
 * layouts do not change within Python 3, and the module is named `.abi3.so`
 * accordingly.
 */
#include <stddef.h>
#include <stdint.h>

/* ---- CPython's stable ABI, as this module uses it (wasm32: pointers and
 * Py_ssize_t are 32 bits). */
typedef intptr_t Py_ssize_t;
typedef struct _object PyObject;
struct _object {
    Py_ssize_t ob_refcnt;
    void *ob_type;
};
typedef PyObject *(*PyCFunctionFast)(PyObject *, PyObject *const *, Py_ssize_t);
typedef struct {
    const char *ml_name;
    PyCFunctionFast ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;
typedef struct {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;
typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots;
    void *m_traverse;
    void *m_clear;
    void *m_free;
} PyModuleDef;
#define METH_FASTCALL 0x0080
#define PYTHON_ABI_VERSION 3

extern PyObject *PyExc_TypeError;
void PyErr_SetString(PyObject *type, const char *message);
const char *PyUnicode_AsUTF8AndSize(PyObject *text, Py_ssize_t *size);
int PyBytes_AsStringAndSize(PyObject *bytes, char **buffer, Py_ssize_t *size);
PyObject *PyBytes_FromStringAndSize(const char *buffer, Py_ssize_t size);
PyObject *PyModule_Create2(PyModuleDef *def, int api_version);

/* wasi-libc's, as the component links it. */
void *realloc(void *pointer, size_t size);
void free(void *pointer);

/* Where the host writes an import's answer (the canonical ABI's `realloc`
 * for this library's imports: componentize-py's linker wants one of the
 * library's own). The answer is bytes, so `align` is 1; wasi-libc's
 * allocator aligns everything to 16. */
__attribute__((export_name("cabi_import_realloc"))) void *cabi_import_realloc(void *old, size_t old_size,
                                                                             size_t align, size_t new_size) {
    (void)old_size;
    if (align > 16) {
        __builtin_trap();
    }
    return realloc(old, new_size);
}

/* ---- The import (wit/interpreter/python.wit):
 * `call: func(method: string, args: marshalled) -> marshalled`, lowered by
 * the canonical ABI to four pointers and lengths and a pointer to where the
 * answer's (pointer, length) is written. */
typedef struct {
    uint8_t *ptr;
    size_t len;
} Answer;

__attribute__((import_module("sandwit:interpreter/methods@0.2.0"), import_name("call")))
extern void methods_call(const char *method, size_t method_len, const char *args, size_t args_len,
                         Answer *answer);

static PyObject *call(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "call() takes a method's name and its marshalled arguments");
        return NULL;
    }
    Py_ssize_t method_len;
    const char *method = PyUnicode_AsUTF8AndSize(argv[0], &method_len);
    if (method == NULL) {
        return NULL;
    }
    char *args;
    Py_ssize_t args_len;
    if (PyBytes_AsStringAndSize(argv[1], &args, &args_len) < 0) {
        return NULL;
    }
    Answer answer = {NULL, 0};
    methods_call(method, (size_t)method_len, args, (size_t)args_len, &answer);
    PyObject *result = PyBytes_FromStringAndSize((const char *)answer.ptr, (Py_ssize_t)answer.len);
    free(answer.ptr);
    return result;
}

static PyMethodDef functions[] = {
    {"call", call, METH_FASTCALL,
     "call(method, marshalled, /) -> bytes\n\n"
     "Calls the host's `sandwit:interpreter/methods.call`: the method's value, or\n"
     "a failed call's (kind, message), marshalled."},
    {NULL, NULL, 0, NULL},
};

/* A statically allocated definition's header, as abi3 extensions have always
 * written it (CPython sets its type when the module is made). */
static PyModuleDef definition = {
    {{1, NULL}, NULL, 0, NULL},
    "_sandwit_methods",
    "The `sandwit:interpreter/methods` import, lowered by hand (interpreter/methods.c).",
    0,
    functions,
    NULL,
    NULL,
    NULL,
    NULL,
};

__attribute__((visibility("default"))) PyObject *PyInit__sandwit_methods(void) {
    return PyModule_Create2(&definition, PYTHON_ABI_VERSION);
}
