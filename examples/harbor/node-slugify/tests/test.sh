#!/bin/bash
node /tests/test.js
