package stream

// ListenMSS is the TCP maximum segment size the stream listener asks for
// (netaccept.Listen). On loopback (64 KiB MTU) a client with small socket
// buffers — the Go client's default is 8 KiB — otherwise advertises a
// receive window below one segment: TCP's silly-window avoidance and
// delayed ACKs then stall every window for tens of milliseconds, and
// throughput falls to a few thousand messages per second. With segments of
// 8 KiB the windows work. Real networks have smaller MSS (1460, 8960 with
// jumbo frames), so this changes nothing there.
const ListenMSS = 8192
