// Command warren is the Warren broker: `warren serve` runs a node.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenmq/warren/broker/config"
	"github.com/warrenmq/warren/broker/gctune"
	"github.com/warrenmq/warren/broker/procsched"
	"github.com/warrenmq/warren/broker/server"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "warren",
		Short:         "Warren: a clustered message broker that speaks AMQP 0.9.1 and the RabbitMQ stream protocol",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(newServeCmd(), newCtlCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "warren", server.Version)
		},
	}
}

func newServeCmd() *cobra.Command {
	var (
		cfgPath string
		dataDir string
		sets    []string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker node",
		Long: `Run a broker node. Settings come from the embedded defaults, then the YAML
file given by --config, then WARREN_* environment variables (for example
WARREN_AMQP_LISTEN=:5673), then --data-dir and --set key=value flags
(for example --set amqp.listen=:5673 --set storage.queue_version=1).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath, os.Environ())
			if err != nil {
				return err
			}
			if dataDir != "" {
				cfg.DataDir = dataDir
			}
			for _, s := range sets {
				k, v, ok := strings.Cut(s, "=")
				if !ok {
					return fmt.Errorf("--set %q: want key=value", s)
				}
				if err := config.Set(&cfg, k, v); err != nil {
					return err
				}
			}
			return serve(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "YAML config file")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data directory (default ./data)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override one setting, key=value (repeatable)")
	return cmd
}

// applySchedPolicy sets the process's scheduling policy (process.sched_policy,
// validated by server.New). The broker runs without it where the system
// refuses it (a seccomp profile, say): a warning, not a failure; on systems
// without per-thread policies (not Linux) a debug line.
func applySchedPolicy(name string, log *slog.Logger) {
	if err := procsched.Apply(procsched.Policy(name)); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, procsched.ErrUnsupported) {
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, "scheduling policy not applied", "policy", name, "err", err)
		return
	}
	log.Info("scheduling policy applied", "policy", name)
}

// startGCTuner lets the heap grow by growth bytes at least between
// collections (process.gc_min_heap_growth), at most a quarter of the
// memory high watermark so that garbage alone never raises the memory
// alarm.
func startGCTuner(growth, memLimit int64, log *slog.Logger) *gctune.Tuner {
	if memLimit > 0 {
		growth = min(growth, memLimit/4)
	}
	t := gctune.Start(uint64(max(growth, 0)))
	if t != nil {
		log.Info("garbage collection tuned", "min_heap_growth", growth)
	}
	return t
}

func serve(ctx context.Context, cfg config.Config) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b, err := server.New(ctx, cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return err
	}
	// After New, which validated the name; Apply reaches the threads
	// New started too.
	applySchedPolicy(cfg.Process.SchedPolicy, log)
	defer startGCTuner(cfg.Process.GCMinHeapGrowth, b.Resources().MemLimit, log).Stop()
	if err := b.Start(context.WithoutCancel(ctx)); err != nil {
		_ = b.Shutdown(context.Background())
		log.Error("cannot listen", "err", err)
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return err
	}
	log.Info("stopped")
	return nil
}
