// Package twohost holds the tests that need two hosts: they run in the
// two-host topology of the rdma_rxe test VMs (make vmtest2; rxevm -hosts
// 2), where two guests are joined by a virtual Ethernet wire and each has
// an rxe device on it (testkit.WireDev). The tests run on host A and start
// programs on host B through testkit.PeerHost. Every test is named
// TestTwoHost*: the runner runs only those with -hosts 2 and never runs
// them in a single guest. On the host (go test) they skip. A test that has
// the runner power host B off (testkit.Host.PowerOff) is named
// TestTwoHostPowerOff*: it runs alone in a boot of its own (make vmtest2
// gives it one), since no test after it could reach host B.
package twohost
