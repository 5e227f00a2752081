// Package procsched sets the Linux scheduling policy of every thread of the
// broker's process.
//
// The broker's threads wake each other and are woken by their clients'
// sockets tens of thousands of times a second. Under the default policy
// (SCHED_OTHER) each such wake-up may preempt whatever runs on the woken
// thread's CPU: another broker thread in the middle of its work, or, on a
// machine the broker shares with its clients, the very client thread that
// is producing the next message. SCHED_BATCH keeps the CPU share (same
// weight, same nice value) and only drops that wake-up preemption: a woken
// thread takes an idle CPU, or waits for the running thread's slice.
//
// A policy is a per-thread attribute that new threads inherit from the
// thread that creates them, and the Go runtime creates threads at any
// time, so Apply sets it on every thread the process has, looking again
// until a pass finds none left to change; threads started afterwards
// inherit it. Switching between the normal policies (normal and batch)
// needs no privilege. Apply keeps each thread's nice value, and leaves
// threads under any other policy (real-time, idle, deadline) alone: those
// were chosen on purpose, for example by starting the broker under chrt.
package procsched
