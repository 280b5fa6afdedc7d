#!/bin/sh
# C-C and Go-Go pairs of each perftest latency tool and its Go port,
# alternated, on rxe0 of an rxe guest; prints the client's t_typical and
# t_avg per run as "R <tool-mode> <size> <C|Go> typ <us> avg <us>".
# Run it in a guest: go run ./internal/testkit/cmd/rxevm -kernel 6.1 \
#   -shell-cmd "$(cat scripts/lat-vs-c.sh)"
one() { # srv cli size port tag mode extra
  timeout 30 $1 -d rxe0 -x 1 -s $3 -n 2000 -p $4 $7 >/dev/null 2>&1 &
  sleep 0.3
  timeout 25 $2 -d rxe0 -x 1 -s $3 -n 2000 -p $4 $7 10.99.0.1 2>&1 | awk -v t="$5" -v s=$3 -v m="$6" '$1==s && NF>=9 {print "R", m, s, t, "typ", $5, "avg", $6}'
  wait
}
p=23000
for r in 1 2 3 4 5; do
  for s in 2 4096; do
    for m in write-poll send-poll send-ev read-poll read-ev; do
      v=${m%-*}; e=""; [ "${m#*-}" = ev ] && e="-e"
      p=$((p+1)); one ib_${v}_lat ib_${v}_lat $s $p C $m "$e"
      p=$((p+1)); one ${v}lat ${v}lat $s $p Go $m "$e"
    done
  done
done
