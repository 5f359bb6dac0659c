package testkit

// QuickBreaker is a registry's breaker block, to follow a "defaults:" line, for tests that make
// a provider's breaker open and close within seconds: it opens at 30 % failures over a 2 s
// window once 10 outcomes are in, stays open 1 s, and then lets 3 probes through.
const QuickBreaker = `  breaker:
    failure_ratio: 0.3
    window: 2s
    min_samples: 10
    cooldown: 1s
    probes: 3
`
