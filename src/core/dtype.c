/* Element types: names, sizes, f16/bf16 conversion and generic element access. The generic
 * loads/stores are for cold paths (Cast, shape arithmetic, tests), never for inner loops. */
#include "core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What a dtype holds, for the predicates below. */
typedef enum { DT_OTHER, DT_FLOAT, DT_INT, DT_BOOL } dtype_kind;

/* One row per element type: its name, its size (0: anvil cannot hold it), its kind and, for
 * integers and bool, the smallest and largest value (UINT64's largest cut to INT64_MAX). */
typedef struct dtype_row {
    const char *name;
    size_t size;
    dtype_kind kind;
    int64_t lo, hi;
} dtype_row;

static const dtype_row dtype_rows[] = {
    [ANVIL_DTYPE_UNDEFINED] = {"UNDEFINED", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT32] = {"FLOAT", 4, DT_FLOAT, 0, 0},
    [ANVIL_DTYPE_UINT8] = {"UINT8", 1, DT_INT, 0, UINT8_MAX},
    [ANVIL_DTYPE_INT8] = {"INT8", 1, DT_INT, INT8_MIN, INT8_MAX},
    [ANVIL_DTYPE_UINT16] = {"UINT16", 2, DT_INT, 0, UINT16_MAX},
    [ANVIL_DTYPE_INT16] = {"INT16", 2, DT_INT, INT16_MIN, INT16_MAX},
    [ANVIL_DTYPE_INT32] = {"INT32", 4, DT_INT, INT32_MIN, INT32_MAX},
    [ANVIL_DTYPE_INT64] = {"INT64", 8, DT_INT, INT64_MIN, INT64_MAX},
    [ANVIL_DTYPE_STRING] = {"STRING", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_BOOL] = {"BOOL", 1, DT_BOOL, 0, 1},
    [ANVIL_DTYPE_FLOAT16] = {"FLOAT16", 2, DT_FLOAT, 0, 0},
    [ANVIL_DTYPE_FLOAT64] = {"DOUBLE", 8, DT_FLOAT, 0, 0},
    [ANVIL_DTYPE_UINT32] = {"UINT32", 4, DT_INT, 0, UINT32_MAX},
    [ANVIL_DTYPE_UINT64] = {"UINT64", 8, DT_INT, 0, INT64_MAX},
    [ANVIL_DTYPE_COMPLEX64] = {"COMPLEX64", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_COMPLEX128] = {"COMPLEX128", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_BFLOAT16] = {"BFLOAT16", 2, DT_FLOAT, 0, 0},
    [ANVIL_DTYPE_FLOAT8E4M3FN] = {"FLOAT8E4M3FN", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT8E4M3FNUZ] = {"FLOAT8E4M3FNUZ", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT8E5M2] = {"FLOAT8E5M2", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT8E5M2FNUZ] = {"FLOAT8E5M2FNUZ", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_UINT4] = {"UINT4", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_INT4] = {"INT4", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT4E2M1] = {"FLOAT4E2M1", 0, DT_OTHER, 0, 0},
    [ANVIL_DTYPE_FLOAT8E8M0] = {"FLOAT8E8M0", 0, DT_OTHER, 0, 0},
};
_Static_assert(sizeof dtype_rows / sizeof dtype_rows[0] == ANVIL_DTYPE_FLOAT8E8M0 + 1,
               "dtype_rows has one row per anvil_dtype");

/* dt's row, or NULL for a value outside anvil_dtype. */
static const dtype_row *dtype_row_of(anvil_dtype dt) {
    return (unsigned)dt < sizeof dtype_rows / sizeof dtype_rows[0] ? &dtype_rows[dt] : NULL;
}

const char *anvil_dtype_name(anvil_dtype dt) {
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->name : "UNKNOWN";
}

size_t anvil_dtype_size(anvil_dtype dt) {
    const dtype_row *r = dtype_row_of(dt);
    return r ? r->size : 0;
}

bool core_dtype_supported(anvil_dtype dt) {
    return anvil_dtype_size(dt) != 0;
}

bool core_dtype_is_float(anvil_dtype dt) {
    const dtype_row *r = dtype_row_of(dt);
    return r && r->kind == DT_FLOAT;
}

bool core_dtype_is_int(anvil_dtype dt) {
    const dtype_row *r = dtype_row_of(dt);
    return r && r->kind == DT_INT;
}

bool core_dtype_int_range(anvil_dtype dt, int64_t *lo, int64_t *hi) {
    const dtype_row *r = dtype_row_of(dt);
    if (!r || (r->kind != DT_INT && r->kind != DT_BOOL)) return false;
    *lo = r->lo;
    *hi = r->hi;
    return true;
}

float core_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t core_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (absx < 0x38800000u) {                                  /* subnormal or zero in f16 */
        if (absx < 0x33000000u) return (uint16_t)sign;
        /* f16 subnormals count units of 2^-24; value = m * 2^(e-150) */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;
        uint32_t out = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (out & 1))) out++;
        return (uint16_t)(sign | out);
    }
    uint32_t out = ((absx >> 13) - (112u << 10));
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (out & 1))) out++;
    return (uint16_t)(sign | out);
}

float core_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t core_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fff + lsb;
    return (uint16_t)(x >> 16);
}

/* Reads element i of an integer or bool buffer into *out (UINT64 wraps); false for any other
 * dtype. */
static bool load_int(anvil_dtype dt, const void *p, size_t i, int64_t *out) {
    switch (dt) {
    case ANVIL_DTYPE_BOOL:
        *out = ((const uint8_t *)p)[i] != 0;
        return true;
    case ANVIL_DTYPE_UINT8:
        *out = ((const uint8_t *)p)[i];
        return true;
    case ANVIL_DTYPE_INT8:
        *out = ((const int8_t *)p)[i];
        return true;
    case ANVIL_DTYPE_UINT16:
        *out = ((const uint16_t *)p)[i];
        return true;
    case ANVIL_DTYPE_INT16:
        *out = ((const int16_t *)p)[i];
        return true;
    case ANVIL_DTYPE_INT32:
        *out = ((const int32_t *)p)[i];
        return true;
    case ANVIL_DTYPE_INT64:
        *out = ((const int64_t *)p)[i];
        return true;
    case ANVIL_DTYPE_UINT32:
        *out = ((const uint32_t *)p)[i];
        return true;
    case ANVIL_DTYPE_UINT64:
        *out = (int64_t)((const uint64_t *)p)[i];
        return true;
    default:
        return false;
    }
}

/* d truncated toward zero, with NaN as 0 and out-of-range values saturated (no UB). */
static int64_t f64_to_i64_sat(double d) {
    if (!(d == d)) return 0;
    if (d >= 9.2233720368547758e18) return INT64_MAX;
    if (d <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)d;
}

double core_load_f64(anvil_dtype dt, const void *p, size_t i) {
    int64_t x;
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
        return ((const float *)p)[i];
    case ANVIL_DTYPE_FLOAT64:
        return ((const double *)p)[i];
    case ANVIL_DTYPE_FLOAT16:
        return core_f16_to_f32(((const uint16_t *)p)[i]);
    case ANVIL_DTYPE_BFLOAT16:
        return core_bf16_to_f32(((const uint16_t *)p)[i]);
    case ANVIL_DTYPE_UINT64: /* load_int would wrap values above INT64_MAX */
        return (double)((const uint64_t *)p)[i];
    default:
        return load_int(dt, p, i, &x) ? (double)x : 0.0;
    }
}

int64_t core_load_i64(anvil_dtype dt, const void *p, size_t i) {
    int64_t x;
    if (load_int(dt, p, i, &x)) return x;
    return f64_to_i64_sat(core_load_f64(dt, p, i));
}

void core_store_f64(anvil_dtype dt, void *p, size_t i, double v) {
    switch (dt) {
    case ANVIL_DTYPE_FLOAT32:
        ((float *)p)[i] = (float)v;
        break;
    case ANVIL_DTYPE_FLOAT64:
        ((double *)p)[i] = v;
        break;
    case ANVIL_DTYPE_FLOAT16:
        ((uint16_t *)p)[i] = core_f32_to_f16((float)v);
        break;
    case ANVIL_DTYPE_BFLOAT16:
        ((uint16_t *)p)[i] = core_f32_to_bf16((float)v);
        break;
    case ANVIL_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0.0;
        break;
    default: /* float -> int truncates toward zero */
        core_store_i64(dt, p, i, f64_to_i64_sat(v));
    }
}

void core_store_i64(anvil_dtype dt, void *p, size_t i, int64_t v) {
    switch (dt) {
    case ANVIL_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case ANVIL_DTYPE_UINT8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case ANVIL_DTYPE_INT8:
        ((int8_t *)p)[i] = (int8_t)v;
        break;
    case ANVIL_DTYPE_UINT16:
        ((uint16_t *)p)[i] = (uint16_t)v;
        break;
    case ANVIL_DTYPE_INT16:
        ((int16_t *)p)[i] = (int16_t)v;
        break;
    case ANVIL_DTYPE_INT32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case ANVIL_DTYPE_INT64:
        ((int64_t *)p)[i] = v;
        break;
    case ANVIL_DTYPE_UINT32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        break;
    case ANVIL_DTYPE_UINT64:
        ((uint64_t *)p)[i] = (uint64_t)v;
        break;
    default:
        core_store_f64(dt, p, i, (double)v);
        break;
    }
}

bool core_numel(const int64_t *dims, int rank, size_t *out) {
    /* The product of the non-zero dims must fit in int64 even where a zero dim makes the count
     * 0: kernels compute strides as products of dims, zero-size tensors included. */
    int64_t n = 1;
    bool zero = false;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        if (dims[i] == 0)
            zero = true;
        else if (!core_mul_i64(n, dims[i], &n))
            return false;
    }
    *out = zero ? 0 : (size_t)n;
    return true;
}

bool core_tensor_bytes(anvil_dtype dt, const int64_t *dims, int rank, size_t *out) {
    size_t n, es = anvil_dtype_size(dt);
    if (es == 0 || !core_numel(dims, rank, &n)) return false;
    return core_mul_size(n, es, out);
}

/* 0: the default, 16 GiB */
static size_t max_tensor_bytes;

size_t core_max_tensor_bytes(void) {
    return max_tensor_bytes ? max_tensor_bytes : (size_t)16 << 30;
}

void core_max_tensor_bytes_set(size_t bytes) {
    max_tensor_bytes = bytes;
}
