"""A real allocation-heavy Python program for `make bench`: builds records of strings,
round-trips them through JSON, groups, sorts and formats them. Usage: alloc_heavy.py ROUNDS
(about 0.1 s of work per round here). Prints a checksum so the work cannot be skipped."""
import json
import sys


def make_records(n, salt):
    return [{"id": i, "name": "user-%d-%d" % (salt, i), "tags": ["t%d" % (i % 7), "g%d" % (i % 13)],
             "score": (i * 2654435761 + salt) % 1000 / 7.0, "note": "x" * (i % 90)}
            for i in range(n)]


def one_round(salt):
    records = make_records(6000, salt)
    text = json.dumps(records)
    parsed = json.loads(text)
    groups = {}
    for r in parsed:
        groups.setdefault(r["tags"][1], []).append(r["name"].upper() + ":" + r["note"])
    lines = sorted("%s=%d" % (k, len(v)) for k, v in groups.items())
    words = " ".join(r["name"] for r in parsed).split("-")
    return len(text) + len(lines) + len(words) + sum(len(v[-1]) for v in groups.values())


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit("usage: alloc_heavy.py ROUNDS (a positive integer)")
    print(sum(one_round(salt) for salt in range(int(sys.argv[1]))))


if __name__ == "__main__":
    main()
