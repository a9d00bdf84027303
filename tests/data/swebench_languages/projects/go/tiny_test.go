package tiny

import "testing"

func TestAddGood(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("1 + 2 should be 3")
	}
}

func TestAddBad(t *testing.T) {
	if Add(2, 2) != 5 {
		t.Fatal("2 + 2 should be 5")
	}
}

func TestAddSkipped(t *testing.T) {
	t.Skip("not today")
}
