<?php

use PHPUnit\Framework\TestCase;

final class AddTest extends TestCase
{
    public function testAddGood(): void
    {
        $this->assertSame(3, 1 + 2);
    }

    public function testAddBad(): void
    {
        $this->assertSame(5, 2 + 2);
    }

    public function testAddSkipped(): void
    {
        $this->markTestSkipped('not today');
    }
}
