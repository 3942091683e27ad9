#!/usr/bin/env python3
"""Sums the samples of one family in a Prometheus text scrape whose labels include every given
name=value pair; prints the sum (0 when none matches) and, with -n, how many samples matched.

    istio_metric.py URL FAMILY [name=value ...]
"""
import re
import sys
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def main():
    args = sys.argv[1:]
    count = args[:1] == ['-n']
    if count:
        args = args[1:]
    url, family, want = args[0], args[1], dict(a.split('=', 1) for a in args[2:])
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    total, matched = 0, 0
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m or m.group(1) != family:
            continue
        labels = dict(LABEL.findall(m.group(2) or ''))
        if all(labels.get(k) == v for k, v in want.items()):
            total += int(float(m.group(3)))
            matched += 1
    print(matched if count else total)


if __name__ == '__main__':
    main()
