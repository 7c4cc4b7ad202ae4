package main

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chart draws the hand-off latency (idle gap p99, and wait p99) against
// the number of workers, one line per row, log-log.
func (res *results) chart(path string) error {
	p := plot.New()
	p.Title.Text = "Hand-off latency under contention (one key, hold 200 µs, think 1 ms)"
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "idle gap p99: release → next holder (ms, log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(workerTicks(res.Cfg.workers))
	p.Y.Tick.Marker = plot.ConstantTicks(latencyTicks())
	p.Legend.Top, p.Legend.Left = true, true

	palette := []color.RGBA{
		{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
		{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff}, {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	}
	for i, l := range res.Libs {
		var xy plotter.XYs
		for _, pr := range res.Contention {
			if pr.Real.Lib == l && pr.Real.Gap.q(0.99) > 0 {
				xy = append(xy, plotter.XY{X: float64(pr.Real.Shape.Workers), Y: float64(pr.Real.Gap.q(0.99)) / 1e6})
			}
		}
		if len(xy) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		if !l.Peer {
			line.Width = vg.Points(3)
		} else {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line, points)
		p.Legend.Add(l.Name, line, points)
	}
	p.Y.Max *= 4 // headroom above the highest line for the legend
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

func workerTicks(ws []int) []plot.Tick {
	var ts []plot.Tick
	for _, w := range ws {
		ts = append(ts, plot.Tick{Value: float64(w), Label: fmt.Sprint(w)})
	}
	return ts
}

// latencyTicks labels the log-scale latency axis at 1-2-5 steps, which
// plot.LogTicks leaves unlabelled between powers of ten.
func latencyTicks() []plot.Tick {
	var ts []plot.Tick
	for _, decade := range []float64{0.01, 0.1, 1, 10, 100, 1000} {
		for _, m := range []float64{1, 2, 5} {
			v := decade * m
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
		}
	}
	return ts
}
