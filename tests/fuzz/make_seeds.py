#!/usr/bin/env python3
"""Writes the seed corpora of the parser fuzz targets (tests/fuzz.cmake) with fixed seeds:

    make_seeds.py [OUT_DIR]        (default: tests/fuzz/seeds beside this script)

    npy/        .npy files of every dtype anvil reads, versions 1.0-3.0, ranks 0-4, zero-size ones
    npz/        .npz archives as numpy writes them: stored and deflated, zip64 fields forced
    ckpt/       training checkpoints (SGD, momentum, Adam, accumulation; BatchNorm statistics),
                each preceded by the byte fuzz_ckpt.c reads as "write the right CRC" (1)
    db_import/  JSON exports of the tuning database (`anvil db export --json`'s form)
    graph/      random bytes for fuzz_graph.c, whose every byte is a choice

Only the standard library: the formats are written by hand here, as the readers expect them.
Running it again writes the same files.
"""
import io
import json
import os
import random
import struct
import sys
import zipfile
import zlib

DTYPES = ["<f4", "<f8", "<f2", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "|b1"]
SIZES = {"f4": 4, "f8": 8, "f2": 2, "i1": 1, "u1": 1, "i2": 2, "u2": 2, "i4": 4, "u4": 4,
         "i8": 8, "u8": 8, "b1": 1}


def npy_bytes(descr, shape, rng, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(header) + 1) % 64) % 64
    header = (header + " " * pad + "\n").encode("latin1")
    numel = 1
    for d in shape:
        numel *= d
    data = bytes(rng.randrange(256) for _ in range(numel * SIZES[descr[1:]]))
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(header)) + header + data


def npz_bytes(entries, deflate):
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            with z.open(info, "w", force_zip64=True) as f:
                f.write(data)
    return buf.getvalue()


def ckpt_bytes(rng, optimizer, has, params, stats):
    out = bytearray(b"ANVILCKP")
    out += struct.pack("<IIQQQ", 2, optimizer, rng.randrange(100), rng.randrange(100), 0)
    out += struct.pack("<II", 1 if has[0] else 0, len(params))
    out += struct.pack("<III", *(1 if h else 0 for h in has))
    for name, numel in params:
        out += struct.pack("<I", len(name)) + name.encode() + struct.pack("<Q", numel)
        for _ in range(1 + sum(1 for h in has if h)):
            out += struct.pack("<%df" % numel, *(rng.uniform(-1, 1) for _ in range(numel)))
    out += struct.pack("<I", len(stats))
    for name, numel in stats:
        out += struct.pack("<I", len(name)) + name.encode() + struct.pack("<Q", numel)
        out += struct.pack("<%df" % numel, *(rng.uniform(0, 2) for _ in range(numel)))
    out += struct.pack("<I", zlib.crc32(bytes(out)))
    return b"\x01" + bytes(out)


def db_record(rng, i):
    dims = [rng.choice([1, 3, 64, 128, 224, 512]) for _ in range(rng.randrange(0, 7))]
    family = rng.choice(["gemm", "conv", "eltwise", "dwconv"])
    return {
        "key": "%s:%s:f32" % (family, "x".join(str(d) for d in dims) or "scalar"),
        "fingerprint": "x86_64;avx512;l2=%d" % rng.choice([1048576, 2097152]),
        "family": family,
        "variant": rng.choice(["gemm_avx512_8x32", "conv_im2col", "elt_avx2", "reference"]),
        "params": rng.choice(["", "mc=64,kc=256", "tile=8x32"]),
        "source": rng.choice(["offline", "online", ""]),
        "dims": dims,
        "median_ns": round(rng.uniform(100, 1e7), 1),
        "spread": round(rng.uniform(0, 0.2), 4),
        "max_err": rng.choice([0, 1e-6, 3.5e-5]),
        "reps": rng.randrange(1, 50),
        "unix_time": 1700000000 + i,
    }


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main(argv):
    out = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "seeds")
    rng = random.Random(33)
    shapes = [(), (0,), (3,), (2, 3), (1, 2, 0, 2), (2, 1, 2, 2)]
    for i, descr in enumerate(DTYPES):
        shape = shapes[i % len(shapes)]
        write(f"{out}/npy/{descr[1:]}_v1.npy", npy_bytes(descr, shape, rng))
    write(f"{out}/npy/f4_v2.npy", npy_bytes("<f4", (2, 2), rng, version=2))
    write(f"{out}/npy/i8_v3.npy", npy_bytes("<i8", (3,), rng, version=3))

    entries = [("x", npy_bytes("<f4", (2, 3), rng)), ("y", npy_bytes("<i8", (4,), rng)),
               ("empty", npy_bytes("|u1", (0, 2), rng))]
    write(f"{out}/npz/stored.npz", npz_bytes(entries, False))
    write(f"{out}/npz/deflated.npz", npz_bytes(entries, True))
    write(f"{out}/npz/one.npz", npz_bytes([("w", npy_bytes("<f2", (2, 2), rng))], True))
    write(f"{out}/npz/none.npz", npz_bytes([], False))

    write(f"{out}/ckpt/sgd.ckpt", ckpt_bytes(rng, 0, (False, False, False), [("w", 6), ("b", 2)], []))
    write(f"{out}/ckpt/momentum_bn.ckpt",
          ckpt_bytes(rng, 0, (True, False, False), [("conv.w", 8)],
                     [("bn.mean", 2), ("bn.var", 2)]))
    write(f"{out}/ckpt/adam_acc.ckpt",
          ckpt_bytes(rng, 1, (True, True, True), [("fc.w", 4), ("fc.b", 1), ("e", 0)], []))

    for n in (0, 1, 3):
        doc = {"schema_version": 1, "records": [db_record(rng, i) for i in range(n)]}
        write(f"{out}/db_import/records_{n}.json", json.dumps(doc, indent=1).encode())

    for i in range(24):
        write(f"{out}/graph/g{i:02d}.bin", bytes(rng.randrange(256) for _ in range(48 + 8 * i)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
