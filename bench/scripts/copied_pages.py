"""Which pages a pre-forked sandbox holds of its own, right after its fork, warm-up and
lockdown: its copies of the zygote's pages (a copy-on-write fault each) and the pages
it was given zeroed, by mapping, with the runs they form. Starts one `rsandbox serve
--stdio`, waits for its children and reads their `/proc/PID/pagemap`: a present page
mapped by this process alone (bit 56) is the child's own; it is a copy when the
zygote has a page at that address. Needs root (other processes' page maps).

    python3 bench/scripts/copied_pages.py target/release/rsandbox
"""
import collections
import struct
import subprocess
import sys
import time

PRESENT, EXCLUSIVE = 1 << 63, 1 << 56


def mappings(pid):
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        low, high = (int(x, 16) for x in fields[0].split("-"))
        yield low, high, fields[1], fields[5] if len(fields) > 5 else "[anon]"


def page_map(pid, low, high):
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(low // 4096 * 8)
        data = f.read((high - low) // 4096 * 8)
    return struct.unpack(f"{len(data) // 8}Q", data)


def own_pages(zygote, child):
    copied, zeroed, runs = collections.Counter(), collections.Counter(), []
    for low, high, perms, name in mappings(child):
        if "w" not in perms:
            continue
        mine = page_map(child, low, high)
        theirs = page_map(zygote, low, high)
        run = 0
        for entry, parent in zip(mine, theirs):
            if entry & PRESENT and entry & EXCLUSIVE:
                (copied if parent & PRESENT else zeroed)[name] += 1
                run += 1
            elif run:
                runs.append(run)
                run = 0
        if run:
            runs.append(run)
    return copied, zeroed, runs


def main():
    cli = sys.argv[1]
    server = subprocess.Popen([cli, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL)
    server.stdin.write(b'{"op":"eval","id":1,"code":"1+1"}\n')
    server.stdin.flush()
    server.stdout.readline()
    time.sleep(1)  # the replacements forked, warmed up and locked down
    zygote = int(subprocess.check_output(["pgrep", "-P", str(server.pid), "rsandbox-zygote"]).split()[0])
    children = subprocess.check_output(["pgrep", "-P", str(zygote)]).split()
    for child in map(int, children):
        copied, zeroed, runs = own_pages(zygote, child)
        faults = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[7]
        print(f"child {child}: {faults} minor faults; {sum(copied.values())} pages copied, "
              f"{sum(zeroed.values())} zeroed, in {len(runs)} runs")
        print("  copied by mapping:", ", ".join(f"{n} {c}" for n, c in copied.most_common(6)))
        print("  zeroed by mapping:", ", ".join(f"{n} {c}" for n, c in zeroed.most_common(6)))
        print("  runs (length: how many):", dict(sorted(collections.Counter(runs).items())[:10]))
    server.stdin.close()
    server.wait()


main()
