#!/bin/bash
# $1 = label; samples per-thread CPU ticks of all hvd_dqn.train python processes over 10 s after 30 s
sleep 30
snap() { for p in $(pgrep -f "python -m hvd_dqn.train"); do for t in /proc/$p/task/*; do echo "$p-$(basename $t) $(awk '{print $14+$15}' $t/stat 2>/dev/null)"; done; done | sort; }
snap > /tmp/s42/$1.a; sleep 10; snap > /tmp/s42/$1.b
join /tmp/s42/$1.a /tmp/s42/$1.b | awk '{d=$3-$2; if (d>3) print $1, d}' | sort -k2 -n -r > /tmp/s42/$1.threads
