#!/bin/bash
# The oracle: sort a copy, then take the middle.
set -e
cat > /app/stats.go <<'GO'
// Package stats holds small statistics helpers.
package stats

import "sort"

// Median returns the median of values (0 for none).
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	mid := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[mid-1] + sorted[mid]) / 2
	}
	return sorted[mid]
}
GO
