/*
 * pv_sleeper: a thread that wakes periodically and does nothing else,
 * the way the Go runtime's sysmon does in a process whose goroutine never
 * blocks (it polls every 10 ms at most). docs/performance.md ("sysmon's
 * 10 ms polling is most of the steady-state gap") pins one to each vCPU
 * next to ibv_rc_pingpong to see what such wake-ups cost a C ping-pong
 * under TCG.
 *
 *   pv_sleeper [PERIOD_US]     (default 10000; runs until killed)
 *
 * The rxevm runner compiles every .c file of this directory on the host
 * into the guest's /usr/bin.
 */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long us = argc > 1 ? atol(argv[1]) : 10000;
	struct timespec ts;

	if (us < 1)
		us = 10000;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	for (;;)
		nanosleep(&ts, NULL);
}
