package registrytest

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

// EveryProvider is a registry's providers list with an entry for each push service pushsim
// simulates, under a host it serves (the fallback takes the rest), for tests that run the
// worker on the whole product's routing.
const EveryProvider = `providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
  - id: autopush
    hosts: [push.services.mozilla.com]
  - id: apple
    hosts: [web.push.apple.com]
  - id: wns
    hosts: [notify.windows.com]
  - id: fallback
    kind: generic
`
