// y = x + 1, with x donated to y (its buffer is reused).
module @donate_add_one attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}", tf.aliasing_output = 0 : i32})
      -> (tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) {
    %one = stablehlo.constant dense<1.0> : tensor<16x4xf32>
    %y = stablehlo.add %x, %one : tensor<16x4xf32>
    return %y : tensor<16x4xf32>
  }
}
