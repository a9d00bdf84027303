require "test/unit"

class TestAdd < Test::Unit::TestCase
  def test_add_good
    assert_equal(3, 1 + 2)
  end

  def test_add_bad
    assert_equal(5, 2 + 2)
  end

  def test_add_omitted
    omit("not today")
  end
end
