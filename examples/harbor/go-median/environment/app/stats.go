// Package stats holds small statistics helpers.
package stats

// Median returns the median of values (0 for none).
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	return values[len(values)/2]
}
