package amqp

// ListenMSS is the TCP maximum segment size the AMQP listener asks for
// (netaccept.Listen). On loopback (64 KiB MTU) a consumer whose receive
// window settles a few bytes short of one 64 KiB segment (PerfTest's,
// under load) gets nothing while the broker's socket holds a full queue
// back, then one window per zero-window probe: 2,300 msg/s for seconds, in
// one run of s1 in five to ten. Two segments fit such a window at 32,000
// bytes, and the rates stay as they were (s1, s5, s7 within noise,
// interleaved); smaller segments cost throughput (16 KiB: s5 -10%; 8 KiB,
// the stream listener's: s1 -9%). Real networks' segments are smaller
// anyway.
const ListenMSS = 32000
