#include <gtest/gtest.h>

static int add(int a, int b) { return a + b; }

TEST(AddTest, Good) { EXPECT_EQ(add(1, 2), 3); }

TEST(AddTest, Bad) { EXPECT_EQ(add(2, 2), 5); }
