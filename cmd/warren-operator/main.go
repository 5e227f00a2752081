// Command warren-operator runs the Broker controller: it turns Broker
// custom resources (warrenmq.io/v1alpha1) into running Warren clusters.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/go-logr/logr"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
	"github.com/warrenmq/warren/controllers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "warren-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr, probeAddr, namespaces, image, logLevel string
		leaderElect                                         bool
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (/metrics); 0 turns it off")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader among replicas of the operator (a Lease in the operator's namespace)")
	flag.StringVar(&namespaces, "watch-namespaces", os.Getenv("WATCH_NAMESPACES"), "comma-separated namespaces to watch; empty means all (env WATCH_NAMESPACES)")
	flag.StringVar(&image, "broker-image", envOr("WARREN_BROKER_IMAGE", controllers.DefaultBrokerImage), "image of Brokers that name none (env WARREN_BROKER_IMAGE)")
	flag.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, warrenv1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("scheme: %w", err)
		}
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "warren-operator.warrenmq.io",
	}
	if ns := splitList(namespaces); len(ns) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range ns {
			opts.Cache.DefaultNamespaces[n] = cache.Config{}
		}
	}
	opts.Cache, opts.Client = controllers.CacheOptions(opts.Cache)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	r := &controllers.BrokerReconciler{
		Client:       mgr.GetClient(),
		Recorder:     mgr.GetEventRecorder("warren-operator"),
		DefaultImage: image,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	slog.Info("starting warren-operator", "namespaces", namespaces, "brokerImage", image, "leaderElect", leaderElect)
	return mgr.Start(ctrl.SetupSignalHandler())
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
