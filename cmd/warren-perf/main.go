// Command warren-perf is Warren's load tool for its own benchmarks and the
// end-to-end jobs: it fills streams with exact chunk sizes, consumes
// streams over the stream protocol and over AMQP, and publishes over
// both, printing a summary line, a progress line on long runs and,
// with --json, a machine-readable result. Over AMQP it consumes with
// amqp091-go, or with --client wire with its own minimal consumer on
// Warren's frame codec (amqpwire.go), cheap enough that a run measures the
// broker rather than the client.
//
//	warren-perf stream fill    --stream s --messages 1000000 --chunk 300 --size 12
//	warren-perf stream consume --stream s --offset first
//	warren-perf stream publish --stream s --size 12 --duration 30s
//	warren-perf amqp consume   --queue s --stream-offset first --qos 200
//	warren-perf amqp publish   --queue q --size 12 --duration 30s
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "warren-perf:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	var cpuProfile string
	var profile *os.File
	root := &cobra.Command{
		Use:          "warren-perf",
		Short:        "Load tool for Warren (and RabbitMQ): stream and AMQP publish/consume, stream fill",
		SilenceUsage: true,
		// Errors are printed by main.
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if cpuProfile == "" {
				return nil
			}
			f, err := os.Create(cpuProfile)
			if err != nil {
				return fmt.Errorf("cpu profile: %w", err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return fmt.Errorf("cpu profile: %w", err)
			}
			profile = f
			return nil
		},
		PersistentPostRunE: func(*cobra.Command, []string) error {
			if profile == nil {
				return nil
			}
			pprof.StopCPUProfile()
			return profile.Close()
		},
	}
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write the tool's own CPU profile to this file (go tool pprof)")
	streamCmd := &cobra.Command{Use: "stream", Short: "Stream protocol (port 5552) load"}
	streamCmd.AddCommand(newStreamFillCmd(), newStreamConsumeCmd(), newStreamPublishCmd())
	amqpCmd := &cobra.Command{Use: "amqp", Short: "AMQP 0.9.1 (port 5672) load"}
	amqpCmd.AddCommand(newAMQPConsumeCmd(), newAMQPPublishCmd(), newAMQPDeclareCmd())
	root.AddCommand(streamCmd, amqpCmd)
	return root
}
