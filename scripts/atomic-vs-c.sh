#!/bin/sh
# C-C and Go-Go pairs of perftest's atomic tools and their Go ports,
# alternated, on rxe0 of an rxe guest, for fetch-and-add and
# compare-and-swap, polling and (latency) with -e. Prints, per run,
#   "B <op> <C|Go> rate <Mpps>"                   (ib_atomic_bw, the client's MsgRate)
#   "L <op>-<mode> <C|Go> typ <us> avg <us>"      (ib_atomic_lat, the client's t_typical, t_avg)
# Run it in a guest: go run ./internal/testkit/cmd/rxevm -kernel 6.1 \
#   -shell-cmd "$(cat scripts/atomic-vs-c.sh)"
bw() { # srv-cli-prog port tag op
  timeout 60 $1 -d rxe0 -x 1 -n 20000 -p $2 -A $4 >/dev/null 2>&1 &
  sleep 0.3
  timeout 55 $1 -d rxe0 -x 1 -n 20000 -p $2 -A $4 10.99.0.1 2>&1 | awk -v t="$3" -v o="$4" '$1==8 && NF>=5 {print "B", o, t, "rate", $5}'
  wait
}
lat() { # prog port tag op mode extra
  timeout 30 $1 -d rxe0 -x 1 -n 3000 -p $2 -A $4 $6 >/dev/null 2>&1 &
  sleep 0.3
  timeout 25 $1 -d rxe0 -x 1 -n 3000 -p $2 -A $4 $6 10.99.0.1 2>&1 | awk -v t="$3" -v o="$4-$5" '$1==8 && NF>=9 {print "L", o, t, "typ", $5, "avg", $6}'
  wait
}
p=24000
for r in 1 2 3 4 5; do
  for op in FETCH_AND_ADD CMP_AND_SWAP; do
    p=$((p+1)); bw ib_atomic_bw $p C $op
    p=$((p+1)); bw atomicbw $p Go $op
    for m in poll ev; do
      e=""; [ $m = ev ] && e="-e"
      p=$((p+1)); lat ib_atomic_lat $p C $op $m "$e"
      p=$((p+1)); lat atomiclat $p Go $op $m "$e"
    done
  done
done
