pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

#[cfg(test)]
mod tests {
    use super::add;

    #[test]
    fn add_good() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn add_bad() {
        assert_eq!(add(2, 2), 5);
    }

    #[test]
    #[ignore]
    fn add_ignored() {}
}
