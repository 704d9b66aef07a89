/* schema.h - a declarative shape checker for JSON documents (the report schema lives in tables, not in code).
 *
 * A shape says which JSON types a value may have and, for objects, which keys are known (with their shapes and
 * whether they are required) or that the object is a map whose every value has one shape; for arrays, the shape
 * of the items. kiln_shape_check walks a document against a shape and collects
 *   - problems: a required key missing, a value of the wrong type ("/graphs/klein-4b-8st/knobs/steps: expected
 *     integer, got string");
 *   - unknown keys: keys no shape names, as JSON-pointer-like paths. They are listed, not rejected: a report
 *     written by a newer harness (or by hand) keeps its extra fields and the reader says which it skipped.
 *
 *     static const kiln_shape red = KILN_SHAPE_OBJ(reduction_fields);
 *     kiln_strlist problems = {0}, unknown = {0};
 *     kiln_shape_check(doc, &top, "", &problems, &unknown);
 */
#ifndef KILN_BENCH_SCHEMA_H
#define KILN_BENCH_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A growable list of owned strings (messages, paths). Adding never fails loudly: past the cap, or when memory
 * runs out, the list records only that it overflowed (n stays correct for what it holds; dropped counts). */
typedef struct kiln_strlist {
    char **items;
    size_t n, cap, dropped;
} kiln_strlist;

void kiln_strlist_add(kiln_strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kiln_strlist_free(kiln_strlist *l);

enum {
    KILN_T_NULL = 1 << 0,
    KILN_T_BOOL = 1 << 1,
    KILN_T_INT = 1 << 2,
    KILN_T_REAL = 1 << 3,
    KILN_T_STR = 1 << 4,
    KILN_T_ARR = 1 << 5,
    KILN_T_OBJ = 1 << 6,
    KILN_T_NUM = KILN_T_INT | KILN_T_REAL,
    KILN_T_ANY = 0x7f,
};

typedef struct kiln_shape kiln_shape;

typedef struct kiln_field {
    const char *key; /* NULL ends a field table */
    const kiln_shape *shape;
    bool required;
} kiln_field;

struct kiln_shape {
    unsigned types;          /* KILN_T_* bits allowed */
    const kiln_field *fields; /* object: its known keys (unknown keys are listed) */
    const kiln_shape *items; /* array: item shape; map (is_map): value shape. NULL = anything */
    bool is_map;             /* object with free keys, each value of shape items */
};

/* Checks v against s; path is the location of v ("" for the root). Appends to problems and unknown. */
void kiln_shape_check(const json_t *v, const kiln_shape *s, const char *path, kiln_strlist *problems,
                      kiln_strlist *unknown);

/* "integer", "real", "string", ... for messages. */
const char *kiln_json_type_name(const json_t *v);

#endif
