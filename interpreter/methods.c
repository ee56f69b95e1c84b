/* _sandwit_methods: the `sandwit:interpreter/methods` import, lowered by hand,
 * and the method functions' common case of crossing.invoke in C.
 *
 * The method functions cross to the host through `call(method, marshalled)`.
 * componentize-py's own binding of an import is generic: a Python function
 * around its runtime's `call_import`, which lowers the arguments and lifts
 * the result one value at a time through Python objects. The import's shape
 * is fixed (a string and bytes in, bytes out), so `call` passes the two
 * buffers where CPython keeps them and copies the answer into one `bytes`:
 * the same call, without the generic machinery.
 *
 * `invoke(method, params, values)` is crossing.invoke for calls whose every
 * argument is a scalar that crosses as it is (None, bool, float, bytes, an
 * int within 64 bits, an ASCII str of at most MAX_ASKED_TEXT characters,
 * each of its exact type): the same
 * arguments dict, marshalled, the same stream flushes, the same answer and
 * errors, without the two Python frames, which were most of a call's work in
 * the interpreter. Any other argument, and any call before `configure`, goes
 * to crossing.invoke itself, which alone checks and converts the rest
 * (`plain`), so what may cross is decided in one place.
 *
 * Built by interpreter/build (clang, wasm32-wasi, position-independent) as
 * a shared library that componentize-py links into the component like any
 * native extension. No CPython headers for wasm32-wasi exist outside
 * componentize-py's own build, so the few declarations it needs are written
 * below; they are all of CPython's stable ABI (PEP 384, the 3.12 limited
 * API for `PyObject_Vectorcall`), whose signatures and layouts do not change
 * within Python 3, and the module is named `.abi3.so` accordingly.
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

#define Py_TYPE(object) ((object)->ob_type)

/* Type objects are only compared by address here. */
struct _typeobject;
extern struct _typeobject PyLong_Type, PyUnicode_Type, PyFloat_Type, PyBool_Type, PyBytes_Type,
    PyTuple_Type;
extern PyObject _Py_NoneStruct;
#define Py_None (&_Py_NoneStruct)

extern PyObject *PyExc_TypeError, *PyExc_AttributeError;
void PyErr_SetString(PyObject *type, const char *message);
void PyErr_SetObject(PyObject *type, PyObject *value);
void PyErr_Clear(void);
PyObject *PyErr_Occurred(void);
void Py_IncRef(PyObject *object);
void Py_DecRef(PyObject *object);
const char *PyUnicode_AsUTF8AndSize(PyObject *text, Py_ssize_t *size);
Py_ssize_t PyUnicode_GetLength(PyObject *text);
PyObject *PyUnicode_InternFromString(const char *text);
int PyBytes_AsStringAndSize(PyObject *bytes, char **buffer, Py_ssize_t *size);
PyObject *PyBytes_FromStringAndSize(const char *buffer, Py_ssize_t size);
long long PyLong_AsLongLongAndOverflow(PyObject *number, int *overflow);
Py_ssize_t PyTuple_Size(PyObject *tuple);
PyObject *PyTuple_GetItem(PyObject *tuple, Py_ssize_t index);
PyObject *PyDict_New(void);
int PyDict_SetItem(PyObject *dict, PyObject *key, PyObject *value);
PyObject *PyDict_GetItem(PyObject *dict, PyObject *key);
int PyObject_IsTrue(PyObject *object);
PyObject *PyObject_GetAttr(PyObject *object, PyObject *name);
PyObject *PyObject_GetAttrString(PyObject *object, const char *name);
PyObject *PyObject_CallMethodObjArgs(PyObject *object, PyObject *name, ...);
PyObject *PyObject_Vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
PyObject *PyImport_ImportModule(const char *name);
PyObject *PyModule_GetDict(PyObject *module);
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

__attribute__((import_module("sandwit:interpreter/methods@0.3.0"), import_name("call")))
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

/* ---- invoke: crossing.invoke's common case. */

/* What `configure` took from the crossing module (strong references, kept
 * for the interpreter's life; all NULL before it). */
static struct {
    PyObject *fallback;     /* crossing.invoke */
    PyObject *plugin_error; /* crossing.plugin_error */
    PyObject *dumps;        /* crossing.dumps (marshal.dumps) */
    PyObject *loads;        /* crossing.loads (marshal.loads) */
    PyObject *version;      /* crossing.MARSHAL_VERSION */
    PyObject *own_stdout;   /* crossing.STDOUT, the interpreter's own stream */
    PyObject *own_stderr;   /* crossing.STDERR */
    PyObject *sys_dict;
    PyObject *stdout_name, *stderr_name, *write_through_name, *flush_name;
} crossing;

static PyObject *configure(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    (void)module;
    if (argc != 1) {
        PyErr_SetString(PyExc_TypeError, "configure() takes the crossing module");
        return NULL;
    }
    if (crossing.fallback != NULL) {
        PyErr_SetString(PyExc_TypeError, "configure() was called already");
        return NULL;
    }
    PyObject *from = argv[0];
    PyObject *sys = PyImport_ImportModule("sys");
    if (sys == NULL) {
        return NULL;
    }
    PyObject *sys_dict = PyModule_GetDict(sys);
    Py_IncRef(sys_dict);
    Py_DecRef(sys);
    PyObject *taken[] = {
        PyObject_GetAttrString(from, "invoke"),
        PyObject_GetAttrString(from, "plugin_error"),
        PyObject_GetAttrString(from, "dumps"),
        PyObject_GetAttrString(from, "loads"),
        PyObject_GetAttrString(from, "MARSHAL_VERSION"),
        PyObject_GetAttrString(from, "STDOUT"),
        PyObject_GetAttrString(from, "STDERR"),
        PyUnicode_InternFromString("stdout"),
        PyUnicode_InternFromString("stderr"),
        PyUnicode_InternFromString("write_through"),
        PyUnicode_InternFromString("flush"),
    };
    size_t count = sizeof taken / sizeof taken[0];
    for (size_t i = 0; i < count; i++) {
        if (taken[i] == NULL) {
            for (size_t j = 0; j < count; j++) {
                if (taken[j] != NULL) {
                    Py_DecRef(taken[j]);
                }
            }
            Py_DecRef(sys_dict);
            return NULL;
        }
    }
    crossing.plugin_error = taken[1];
    crossing.dumps = taken[2];
    crossing.loads = taken[3];
    crossing.version = taken[4];
    crossing.own_stdout = taken[5];
    crossing.own_stderr = taken[6];
    crossing.stdout_name = taken[7];
    crossing.stderr_name = taken[8];
    crossing.write_through_name = taken[9];
    crossing.flush_name = taken[10];
    crossing.sys_dict = sys_dict;
    crossing.fallback = taken[0];
    Py_IncRef(Py_None);
    return Py_None;
}

/* The longest str `crosses_as_is` asks for its UTF-8, in code points. */
#define MAX_ASKED_TEXT 4096

/* Whether `value` crosses as it is, for the argument dict: 1 yes, 0 when
 * crossing.invoke must check or convert it (`plain`). Never fails. */
static int crosses_as_is(PyObject *value) {
    struct _typeobject *type = Py_TYPE(value);
    if (type == &PyLong_Type) {
        int overflow;
        (void)PyLong_AsLongLongAndOverflow(value, &overflow);
        return overflow == 0;
    }
    if (type == &PyUnicode_Type) {
        /* ASCII exactly when its UTF-8 has a byte per code point (an ASCII
         * str's UTF-8 is its own data; anything else is left to `plain`,
         * which reports a lone surrogate). Asking encodes any other str and
         * keeps the UTF-8 with it for the str's life, so a long one is left
         * to `plain` unasked. */
        Py_ssize_t length = PyUnicode_GetLength(value);
        if (length > MAX_ASKED_TEXT) {
            return 0;
        }
        Py_ssize_t size;
        if (PyUnicode_AsUTF8AndSize(value, &size) == NULL) {
            PyErr_Clear();
            return 0;
        }
        return size == length;
    }
    return value == Py_None || type == &PyFloat_Type || type == &PyBool_Type || type == &PyBytes_Type;
}

/* `sys.<name>` as Python reads it (a new reference), or NULL with
 * AttributeError. */
static PyObject *sys_stream(PyObject *name, const char *error) {
    PyObject *stream = PyDict_GetItem(crossing.sys_dict, name);
    if (stream == NULL) {
        PyErr_SetString(PyExc_AttributeError, error);
        return NULL;
    }
    Py_IncRef(stream);
    return stream;
}

/* crossing.invoke's `if out is not STDOUT or not out.write_through:
 * out.flush()`. */
static int flush_unless_own_write_through(PyObject *stream, PyObject *own) {
    if (stream == own) {
        PyObject *write_through = PyObject_GetAttr(stream, crossing.write_through_name);
        if (write_through == NULL) {
            return -1;
        }
        int on = PyObject_IsTrue(write_through);
        Py_DecRef(write_through);
        if (on != 0) {
            return on < 0 ? -1 : 0;
        }
    }
    PyObject *flushed = PyObject_CallMethodObjArgs(stream, crossing.flush_name, NULL);
    if (flushed == NULL) {
        return -1;
    }
    Py_DecRef(flushed);
    return 0;
}

/* The marshalled arguments dict of a call whose arguments all cross as
 * they are (a new reference), Py_None when one does not, NULL on error. */
static PyObject *marshal_arguments(PyObject *params, PyObject *values) {
    if (Py_TYPE(params) != &PyTuple_Type || Py_TYPE(values) != &PyTuple_Type) {
        return Py_None;
    }
    Py_ssize_t n = PyTuple_Size(values);
    if (PyTuple_Size(params) != n) {
        return Py_None;
    }
    PyObject *args = PyDict_New();
    if (args == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *param = PyTuple_GetItem(params, i);
        PyObject *value = PyTuple_GetItem(values, i);
        if (Py_TYPE(param) != &PyTuple_Type || PyTuple_Size(param) != 2 || !crosses_as_is(value)) {
            Py_DecRef(args);
            return Py_None;
        }
        if (value == Py_None) {
            /* An optional parameter given None is left out. */
            int required = PyObject_IsTrue(PyTuple_GetItem(param, 1));
            if (required < 0) {
                Py_DecRef(args);
                return NULL;
            }
            if (!required) {
                continue;
            }
        }
        if (PyDict_SetItem(args, PyTuple_GetItem(param, 0), value) < 0) {
            Py_DecRef(args);
            return NULL;
        }
    }
    PyObject *dump_args[] = {args, crossing.version};
    PyObject *marshalled = PyObject_Vectorcall(crossing.dumps, dump_args, 2, NULL);
    Py_DecRef(args);
    return marshalled;
}

static PyObject *invoke(PyObject *module, PyObject *const *argv, Py_ssize_t argc) {
    if (crossing.fallback == NULL) {
        PyErr_SetString(PyExc_TypeError, "invoke() before configure()");
        return NULL;
    }
    if (argc != 3) {
        return PyObject_Vectorcall(crossing.fallback, argv, (size_t)argc, NULL);
    }
    PyObject *method = argv[0];
    PyObject *marshalled = marshal_arguments(argv[1], argv[2]);
    if (marshalled == Py_None) {
        return PyObject_Vectorcall(crossing.fallback, argv, (size_t)argc, NULL);
    }
    if (marshalled == NULL) {
        return NULL;
    }
    /* Written before anything of the code's could run (a replaced stream's
     * `flush`), so what crosses is what was checked; then what was printed
     * is flushed, as crossing.invoke does. */
    PyObject *out = sys_stream(crossing.stdout_name, "module 'sys' has no attribute 'stdout'");
    PyObject *err = out == NULL ? NULL : sys_stream(crossing.stderr_name, "module 'sys' has no attribute 'stderr'");
    int flushed = err != NULL && flush_unless_own_write_through(out, crossing.own_stdout) == 0 &&
                  flush_unless_own_write_through(err, crossing.own_stderr) == 0;
    if (out != NULL) {
        Py_DecRef(out);
    }
    if (err != NULL) {
        Py_DecRef(err);
    }
    if (!flushed) {
        Py_DecRef(marshalled);
        return NULL;
    }
    PyObject *call_args[] = {method, marshalled};
    PyObject *answered = call(module, call_args, 2);
    Py_DecRef(marshalled);
    if (answered == NULL) {
        return NULL;
    }
    PyObject *answer = PyObject_Vectorcall(crossing.loads, &answered, 1, NULL);
    Py_DecRef(answered);
    if (answer == NULL || Py_TYPE(answer) != &PyTuple_Type) {
        return answer;
    }
    /* A failed call's (kind, message): no value is a tuple. */
    if (PyTuple_Size(answer) != 2) {
        Py_DecRef(answer);
        PyErr_SetString(PyExc_TypeError, "the host answered a malformed failure");
        return NULL;
    }
    PyObject *error_args[] = {method, PyTuple_GetItem(answer, 0), PyTuple_GetItem(answer, 1)};
    PyObject *error = PyObject_Vectorcall(crossing.plugin_error, error_args, 3, NULL);
    Py_DecRef(answer);
    if (error == NULL) {
        return NULL;
    }
    PyErr_SetObject((PyObject *)Py_TYPE(error), error);
    Py_DecRef(error);
    return NULL;
}

static PyMethodDef functions[] = {
    {"call", call, METH_FASTCALL,
     "call(method, marshalled, /) -> bytes\n\n"
     "Calls the host's `sandwit:interpreter/methods.call`: the method's value, or\n"
     "a failed call's (kind, message), marshalled."},
    {"invoke", invoke, METH_FASTCALL,
     "invoke(method, params, values, /)\n\n"
     "crossing.invoke, in C for calls whose arguments are all None, bool, float,\n"
     "bytes, ints within 64 bits or short ASCII strs; crossing.invoke itself for any other."},
    {"configure", configure, METH_FASTCALL,
     "configure(crossing, /)\n\n"
     "Takes what `invoke` uses from the crossing module: once, before any call."},
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
