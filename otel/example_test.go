package lockotel_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	lockotel "github.com/lockgen/lockgen/otel"
	"github.com/lockgen/lockgen/runtime"
)

// Lock metrics scraped by Prometheus: the OpenTelemetry Prometheus
// exporter serves what the Observer records on /metrics.
func Example_prometheus() {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		panic(err)
	}
	obs, err := lockotel.New(lockotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))})
	if err != nil {
		panic(err)
	}

	mr := miniredis.NewMiniRedis() // a real Redis in production
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	c, err := runtime.NewClient(rdb, &runtime.Options{Observer: obs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	order := c.Mutex("order:42", runtime.LockOptions{Name: "OrderLock"})
	for range 3 {
		_ = order.Do(context.Background(), func(context.Context) error { return nil })
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "lockgen_lock_acquisitions_total") || strings.HasPrefix(line, "lockgen_lock_hold_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// lockgen_lock_acquisitions_total{lock_kind="reentrant",lock_name="OrderLock"} 3
	// lockgen_lock_hold_duration_seconds_count{lock_kind="reentrant",lock_name="OrderLock"} 3
}
