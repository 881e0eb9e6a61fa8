#!/usr/bin/env python3
"""tfevents-read.py -- an independent reader of TensorBoard event files,
written from the formats' specifications with the standard library only:
TFRecord framing (uint64 length, masked CRC-32C of the length, data,
masked CRC-32C of the data), the protobuf wire format, and the messages of
tensorboard's event.proto, summary.proto and the hparams plugin's
plugin_data.proto / api.proto (field numbers written out below).

Usage: tfevents-read.py FILE   prints one line per record, for example
  file_version brain.Event:2
  step 3 scalar loss 0.25
  step 0 hparams experiment hparams=lr:FLOAT64,opt:STRING metrics=hp_metric
  step 0 hparams session_start lr=0.001 opt='adam'
  step 0 hparams session_end status=SUCCESS
and exits 1 with the reason on a bad CRC, a cut record or a malformed
message.  When tensorboard's own reader can be imported it reads the file
too, and the two must agree on every scalar (exit 1 otherwise)."""
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Bad(Exception):
    pass


def records(blob):
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise Bad("a record cut in its header at byte %d" % pos)
        head = blob[pos:pos + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if hc != masked(head):
            raise Bad("bad length CRC at byte %d" % pos)
        data = blob[pos + 12:pos + 12 + n]
        if len(data) != n or len(blob) < pos + 16 + n:
            raise Bad("a record cut in its data at byte %d" % pos)
        (dc,) = struct.unpack("<I", blob[pos + 12 + n:pos + 16 + n])
        if dc != masked(data):
            raise Bad("bad data CRC at byte %d" % pos)
        yield data
        pos += 16 + n


def varint(buf, pos):
    shift = value = 0
    while True:
        if pos >= len(buf):
            raise Bad("a varint runs past its message")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(buf):
    """(field number, wire type, value) of each field of a message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = varint(buf, pos)
        elif wire == 1:
            v = buf[pos:pos + 8]
            pos += 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
        elif wire == 5:
            v = buf[pos:pos + 4]
            pos += 4
        else:
            raise Bad("wire type %d" % wire)
        if pos > len(buf):
            raise Bad("field %d runs past its message" % num)
        yield num, wire, v


def one(buf, num):
    found = [v for n, _, v in fields(buf) if n == num]
    return found[-1] if found else None


DATA_TYPES = {0: "UNSET", 1: "STRING", 2: "BOOL", 3: "FLOAT64"}
STATUS = {0: "UNKNOWN", 1: "SUCCESS", 2: "FAILURE", 3: "RUNNING"}


def proto_value(buf):
    """google.protobuf.Value: null 1, number 2, string 3, bool 4."""
    for n, _, v in fields(buf):
        if n == 1:
            return "None"
        if n == 2:
            return repr(struct.unpack("<d", v)[0])
        if n == 3:
            return repr(v.decode())
        if n == 4:
            return repr(bool(v))
    return "?"


def hparams(content):
    """HParamsPluginData: version 1, experiment 2, session_start_info 3, session_end_info 4."""
    for n, _, v in fields(content):
        if n == 2:  # Experiment: hparam_infos 4 {name 1, type 4}, metric_infos 5 {name 1 {group 1, tag 2}}
            hps = ["%s:%s" % (one(h, 1).decode(), DATA_TYPES[one(h, 4) or 0])
                   for k, _, h in fields(v) if k == 4]
            mts = [one(one(m, 1), 2).decode() for k, _, m in fields(v) if k == 5]
            return "experiment hparams=%s metrics=%s" % (",".join(hps), ",".join(mts))
        if n == 3:  # SessionStartInfo: hparams 1 (map entries {key 1, value 2})
            pairs = ["%s=%s" % (one(e, 1).decode(), proto_value(one(e, 2) or b""))
                     for k, _, e in fields(v) if k == 1]
            return "session_start " + " ".join(pairs)
        if n == 4:  # SessionEndInfo: status 1
            return "session_end status=" + STATUS[one(v, 1) or 0]
    raise Bad("HParamsPluginData without data")


def event_lines(data):
    """Event: wall_time 1 (double), step 2, file_version 3, summary 5."""
    wall = one(data, 1)
    if wall is None or struct.unpack("<d", wall)[0] <= 0:
        raise Bad("an event without a wall time")
    step = one(data, 2) or 0
    version = one(data, 3)
    if version is not None:
        return ["file_version " + version.decode()]
    out = []
    summary = one(data, 5)
    for n, _, value in fields(summary or b""):
        if n != 1:
            continue
        tag = one(value, 1).decode()  # Summary.Value: tag 1, simple_value 2, metadata 9
        simple = one(value, 2)
        meta = one(value, 9)
        if simple is not None:
            out.append("step %d scalar %s %s" % (step, tag, repr(struct.unpack("<f", simple)[0])))
        elif meta is not None:  # SummaryMetadata: plugin_data 1 {plugin_name 1, content 2}
            plugin = one(meta, 1)
            name = one(plugin, 1).decode()
            if name != "hparams":
                raise Bad("plugin %s" % name)
            out.append("step %d hparams %s" % (step, hparams(one(plugin, 2) or b"")))
        else:
            raise Bad("a summary value of tag %s with neither simple_value nor metadata" % tag)
    return out


def tensorboard_scalars(path):
    """(step, tag, value) of every scalar as tensorboard's own loader reads them, or None."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    except Exception:
        return None
    found = []
    for event in LegacyEventFileLoader(path).Load():
        for v in event.summary.value:
            if v.HasField("simple_value"):
                found.append((event.step, v.tag, v.simple_value))
    return found


def main():
    if crc32c(b"123456789") != 0xE3069283:  # the check value of CRC-32C (RFC 3720, B.4)
        print("crc32c: wrong check value", file=sys.stderr)
        return 1
    path = sys.argv[1]
    with open(path, "rb") as f:
        blob = f.read()
    mine = []
    try:
        for data in records(blob):
            for line in event_lines(data):
                print(line)
                if " scalar " in line:
                    _, step, _, tag, value = line.split(" ", 4)
                    mine.append((int(step), tag, float(value)))
    except (Bad, AttributeError, struct.error, UnicodeDecodeError) as e:
        print("%s: %s" % (path, e), file=sys.stderr)
        return 1
    theirs = tensorboard_scalars(path)
    if theirs is not None and theirs != mine:
        print("%s: tensorboard's reader reads other scalars: %r" % (path, theirs), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
