/* empty.c - stands in for a layer that has no sources yet, so every kiln_<layer> library exists. */
typedef int kiln_empty_translation_unit;
