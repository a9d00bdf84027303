package org.example;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

public class AddTest {
  @Test
  public void testAddGood() {
    assertEquals(3, 1 + 2);
  }

  @Test
  public void testAddBad() {
    assertEquals(5, 2 + 2);
  }
}
