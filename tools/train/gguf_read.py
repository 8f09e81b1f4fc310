"""Minimal GGUF v3 reader (metadata + tensor directory + F32 tensor data).

Used to inspect the bundled stories260K.gguf conventions and to verify our own
export round-trips. Usage: python3 gguf_read.py FILE.gguf [--tensors]
"""
import struct
import sys

# GGUF metadata value types (gguf spec).
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY = 8, 9


class _Cursor:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype in _SCALAR:
            return self.take(_SCALAR[vtype])
        if vtype == GGUF_STRING:
            return self.string()
        if vtype == GGUF_ARRAY:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path):
    """Returns (metadata dict, {name: (ggml_type, ne list, absolute offset)}, raw bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    c = _Cursor(data)
    magic, version = c.take("<4s"), c.take("<I")
    if magic != b"GGUF" or version != 3:
        raise ValueError(f"{path}: not GGUF v3 (magic {magic!r}, version {version})")
    n_tensors, n_kv = c.take("<Q"), c.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = c.string()
        meta[key] = c.value(c.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = c.string()
        nd = c.take("<I")
        ne = [c.take("<Q") for _ in range(nd)]
        gtype, off = c.take("<I"), c.take("<Q")
        infos.append((name, gtype, ne, off))
    align = meta.get("general.alignment", 32)
    base = (c.pos + align - 1) // align * align
    tensors = {name: (gtype, ne, base + off) for name, gtype, ne, off in infos}
    return meta, tensors, data


def tensor_f32(data, entry):
    """F32 tensor as a flat list-like memoryview (ggml type 0 only)."""
    gtype, ne, off = entry
    if gtype != 0:
        raise ValueError("only F32 supported")
    n = 1
    for d in ne:
        n *= d
    return memoryview(data)[off:off + 4 * n].cast("f")


if __name__ == "__main__":
    meta, tensors, _ = read_gguf(sys.argv[1])
    for k, v in meta.items():
        if isinstance(v, list):
            print(f"{k}: array[{len(v)}] first={v[:8]!r} last={v[-3:]!r}")
        else:
            print(f"{k}: {v!r}")
    if "--tensors" in sys.argv:
        for name, (gtype, ne, off) in tensors.items():
            print(f"{name}: type={gtype} ne={ne} off={off}")
