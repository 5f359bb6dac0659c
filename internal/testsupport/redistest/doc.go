// Package redistest starts real redis-server processes for tests: each on a free loopback
// port, with its own temporary directory, AOF on and fsynced on every write, so that a test can
// SIGKILL the server, start it again on the same port and directory, and see exactly what a
// production Redis with appendfsync always would have kept.
//
// It runs the three topologies the worker supports, each process a Server, stopped at the
// test's cleanup:
//
//   - Start: one server. URL is redis://127.0.0.1:port/0; Kill (SIGKILL), Restart (same
//     port, directory and AOF) and Stop act on it.
//   - StartCluster: a Redis Cluster, by default 3 masters with one replica each
//     (ClusterMasters, ClusterReplicas, ClusterConfig change that), node timeout 2000 ms,
//     formed with redis-cli --cluster create. URL is redis+cluster://addr,addr,...; MasterFor
//     names the master serving a key's hash slot, Masters every master, Client a go-redis
//     ClusterClient. KillMaster or Kill SIGKILLs a node, WaitPromotion returns the replica
//     that took over a killed master's slots, and Restart brings a node back (a master whose
//     slots were taken over rejoins as a replica).
//   - StartSentinel: a master, its replica and three Sentinels (quorum 2, down-after 1000 ms,
//     failover-timeout 5000 ms; SentinelMasterName, SentinelNodeConfig and
//     SentinelMonitorConfig change that). URL is redis+sentinel://s1,s2,s3/name; Master and
//     Replica name the data nodes, Client is a go-redis FailoverClient. KillMaster SIGKILLs the
//     master, WaitFailover returns the replica every Sentinel promoted, and Restart brings the
//     old master back as its replica.
//
// Every wait polls with a deadline and, when the deadline passes, fails the test with the
// state that was reached: each node's role, what each node (CLUSTER INFO and CLUSTER NODES)
// or Sentinel reports, and the tail of every log. Nodes are named by their address, which
// Kill and Restart keep.
//
// A go-redis ClusterClient routes by the slot map it last loaded: after a failover it keeps
// sending the killed master's slots to the dead address until it reloads the map, which with
// go-redis's default ClusterStateReloadInterval is up to a minute later. Tests that fail a
// master over with a client open call ReloadState on it, or set that interval.
//
// Tests never skip when redis-server or redis-cli is missing: the helpers fail the test with a
// message that says how to install it, because a silently skipped storage test is a storage
// test that never ran.
package redistest
