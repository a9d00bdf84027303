module example.org/tiny

go 1.19
