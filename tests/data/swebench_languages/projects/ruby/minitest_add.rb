require "minitest/autorun"

# Named as shoulda-context names jekyll's tests ("test_: <context> should <name>. "), which is
# what the official jekyll parser reads.
class TestAdd < Minitest::Test
  define_method("test_: add should be good. ") { assert_equal(3, 1 + 2) }
  define_method("test_: add should be bad. ") { assert_equal(5, 2 + 2) }
end
